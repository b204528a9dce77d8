"""One sync of one registry: read everything first, then write only what changed, in bulk.

A sync that fails for any reason (the registry fails or times out, the database refuses a
write) changes nothing but the registry's stale flag and error: instances are never deleted
by a sync, and one missing from the registry becomes DOWN and is kept. Every instance read
passes ``adapters.validation.screen``: one that cannot be stored is skipped (its stored row,
if any, left as it was), counted in ``Registry.skipped_instances`` and named in
``last_error``, and the others are synced; the registry is not stale for that."""

import logging
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import Field, Q
from django.utils import timezone

from audit import log as audit_log
from registry_sync import announcements
from registry_sync.adapters import (
    ConsulAdapter,
    NacosAdapter,
    RegistryAdapter,
    RegistryError,
    RegistryInstance,
    SkippedInstance,
    validation,
)
from registry_sync.models import Instance, Registry, Service
from registry_sync.registries import adapter_for
from registry_sync.states import ROUTABLE, as_registry_instance, observed_state
from routing_engine.records import usable_version

log = logging.getLogger(__name__)

SYNC_ACTOR = "registry-sync"
LEASE_SECONDS = 120
WRITTEN_FIELDS = ["host", "port", "cluster", "version", "state", "healthy", "enabled",
                  "weight", "metadata", "note", "last_seen"]  # fmt: skip
ROUTING_FIELDS = ("host", "port", "version", "weight")
GONE_NOTE = "Gone from the registry."
# read_registry times PROBE_SERVICES instance lists read one after the other against as many
# read by READ_WORKERS threads, and reads the rest the faster way.
READ_WORKERS = 4
PROBE_SERVICES = 64
# Rows per INSERT (the backend may allow fewer: SQLite's 999 parameters).
INSERT_BATCH = 1000


class SyncFailed(Exception):
    pass


@dataclass
class SyncSummary:
    registry: str
    added: int = 0
    changed: int = 0
    gone: int = 0
    unchanged: int = 0
    reapplied: int = 0
    services_added: int = 0
    routable_changed: set[str] = field(default_factory=set)
    skipped: list[SkippedInstance] = field(default_factory=list)

    @property
    def rows_written(self) -> int:
        return self.added + self.changed + self.gone + self.services_added

    def __str__(self):
        return (
            f"{self.registry}: {self.added} added, {self.changed} changed, {self.gone} gone, "
            f"{self.unchanged} unchanged"
            + (f", offline re-applied to {self.reapplied}" if self.reapplied else "")
            + (f", {len(self.skipped)} skipped as invalid" if self.skipped else "")
        )


def acquire_lease(registry: Registry) -> bool:
    """At most one sync of a registry at a time, across processes: a conditional UPDATE."""
    now = timezone.now()
    return bool(
        Registry.objects.filter(pk=registry.pk)
        .filter(Q(lease_until__isnull=True) | Q(lease_until__lt=now))
        .update(lease_until=now + timedelta(seconds=LEASE_SECONDS))
    )


def release_lease(registry: Registry) -> None:
    Registry.objects.filter(pk=registry.pk).update(lease_until=None)


class Snapshot(dict[str, list[RegistryInstance]]):
    """Service name -> its valid instances, and ``skipped``: what was read but cannot be
    stored (adapters/validation.py), with why. A service whose name is refused is not in
    the mapping (and not read)."""

    def __init__(self):
        super().__init__()
        self.skipped: list[SkippedInstance] = []


def read_registry(
    adapter: RegistryAdapter, progress: Callable[[int, int], None] | None = None
) -> Snapshot:
    """Every service's instances, screened (``validation.screen``: an invalid instance is
    skipped, not an error). Any RegistryError aborts the whole read (nothing is written
    from a partial snapshot); ``progress(done, total)`` runs in this thread, in service
    order.

    Threads pay off when the registry keeps us waiting (a network in between: the round
    trips overlap), and cost time when our own CPU is the bottleneck (a registry on
    loopback: httpx's work per request, and the GIL). So where the adapter allows threads
    and there are enough services, the first lists measure both ways (`bench/sync.py`
    prints how often threads won; figures in bench/README.md)."""
    snapshot = Snapshot()
    services = []
    for name in adapter.list_services():
        if validation.service_name_problem(name) is None:
            services.append(name)
        else:  # not even asked for: the name may not survive a URL
            snapshot.skipped.extend(validation.screen(name, []).skipped)
    done = 0

    def got(name: str, entries: Iterable[RegistryInstance | SkippedInstance]) -> None:
        nonlocal done
        screened = validation.screen(name, entries)
        snapshot[name], done = screened.instances, done + 1
        snapshot.skipped.extend(screened.skipped)
        if progress:
            progress(done, len(services))

    def read(names: list[str], threads: int) -> float:
        started = time.perf_counter()
        if threads > 1:
            _read_concurrently(adapter, names, threads, got)
        else:
            for name in names:
                got(name, adapter.list_instances(name))
        return time.perf_counter() - started

    workers = _read_workers(adapter)
    if workers > 1 and len(services) >= 3 * PROBE_SERVICES:
        one = read(services[:PROBE_SERVICES], 1)
        many = read(services[PROBE_SERVICES : 2 * PROBE_SERVICES], workers)
        read(services[2 * PROBE_SERVICES :], workers if many < one else 1)
    else:
        read(services, 1)
    return snapshot


def _read_concurrently(adapter, names, workers, got) -> None:
    pool = ThreadPoolExecutor(workers, thread_name_prefix="registry-read")
    try:
        futures = [pool.submit(adapter.list_instances, name) for name in names]
        for name, future in zip(names, futures, strict=True):
            got(name, future.result())  # in order, in this thread
    finally:
        # On an error, drop the calls not yet started and wait for those in flight (each
        # bounded by the adapter's timeout) so none outlives the sync.
        pool.shutdown(wait=True, cancel_futures=True)


def _read_workers(adapter: RegistryAdapter) -> int:
    """Threads for ``read_registry``: only for adapters known to be safe to share. The Nacos
    adapter's token refresh (``_auth_params`` / the 403 retry in ``_call``) is not
    thread-safe, so a Nacos registry with credentials is read in one thread; the embedded
    adapter uses the ORM (one connection per thread) and Eureka reads one snapshot. The
    Consul adapter keeps no state between reads (its token is a fixed header)."""
    if isinstance(adapter, ConsulAdapter):
        return READ_WORKERS
    if isinstance(adapter, NacosAdapter) and not adapter.username:
        return READ_WORKERS
    return 1


def _mark_stale(registry: Registry, message: str) -> None:
    try:
        Registry.objects.filter(pk=registry.pk).update(
            stale=True, last_error=message[:2000], last_sync_at=timezone.now()
        )
    except Exception:  # the database itself may be what failed; the next run tries again
        log.exception("Could not mark registry %s stale", registry.name)


def sync_registry(
    registry: Registry,
    *,
    adapter: RegistryAdapter | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> SyncSummary:
    """One sync. Whatever fails (the registry, the adapter's configuration, a database
    write) raises ``SyncFailed`` after marking the registry stale with the error; the write
    phase is one transaction, so no instance is changed then."""
    own_adapter = adapter is None
    try:
        adapter = adapter or adapter_for(registry)
        snapshot = read_registry(adapter, progress)
        summary, reapply = _apply(registry, snapshot, adapter)
        for row in reapply:
            _reapply_offline(adapter, row)
        summary.reapplied = len(reapply)
    except RegistryError as exc:
        log.warning("Registry %s is stale: %s", registry.name, exc)
        _mark_stale(registry, str(exc))
        raise SyncFailed(str(exc)) from exc
    except Exception as exc:
        message = f"Sync failed: {type(exc).__name__}: {exc}"
        log.exception("Registry %s is stale: %s", registry.name, message)
        _mark_stale(registry, message)
        raise SyncFailed(message) from exc
    finally:
        if own_adapter and adapter is not None:
            adapter.close()
    return summary


def _state_key(row: Instance) -> tuple:
    return tuple(getattr(row, name) for name in WRITTEN_FIELDS if name != "last_seen")


@dataclass
class _Observation:
    """One sync's reading of the snapshot against the stored rows: when, the version for
    instances without one, what it writes (new rows, changed rows, rows gone from the
    registry), what it leaves as it was, the services whose routable instances changed,
    and the rows an operator took offline that the registry shows enabled again."""

    now: datetime
    default_version: str
    reapplies: bool  # the registry can take an instance out of traffic (adapter's say)
    created: list[Instance] = field(default_factory=list)
    updated: list[Instance] = field(default_factory=list)
    gone: list[Instance] = field(default_factory=list)
    unchanged: int = 0
    routable_changed: set[str] = field(default_factory=set)
    reapply: list[Instance] = field(default_factory=list)


def _apply(
    registry: Registry, snapshot: Snapshot, adapter: RegistryAdapter
) -> tuple[SyncSummary, list[Instance]]:
    """Writes what the snapshot changes, in one transaction, and marks the registry synced;
    (the summary, the rows whose offline must be re-applied in the registry)."""
    summary = SyncSummary(registry=registry.name, skipped=list(snapshot.skipped))
    seen = _Observation(
        now=timezone.now(),
        default_version=registry.default_version,
        reapplies=getattr(adapter, "disables_in_registry", True),
    )
    with transaction.atomic():
        services = _services_of(registry, snapshot, summary)
        stored = _stored_instances(services.values())
        listed = _observe_listed(snapshot, services, stored, seen)
        _observe_unlisted(stored, listed, summary.skipped, adapter_lists_disabled(adapter), seen)
        _write_instances(seen)
        _summarise(seen, summary)
        _record_success(registry, summary, seen.now)
        rows = seen.created + seen.updated + seen.gone
        transaction.on_commit(lambda: _announce(summary, rows))
    return summary, seen.reapply


def _services_of(
    registry: Registry, snapshot: Snapshot, summary: SyncSummary
) -> dict[str, Service]:
    """By name, the services the snapshot lists or the registry owns: those missing
    created, those of no registry adopted by this one."""
    services = {
        s.name: s for s in Service.objects.filter(Q(name__in=list(snapshot)) | Q(registry=registry))
    }
    created = _create_services([name for name in snapshot if name not in services], registry)
    summary.services_added = len(created)
    services.update(created)
    orphaned = [s.pk for s in services.values() if s.registry_id is None]
    if orphaned:
        Service.objects.filter(pk__in=orphaned).update(registry=registry)
    return services


def _create_services(names: list[str], registry: Registry) -> dict[str, Service]:
    if not names:
        return {}
    # Each registry has its own lease: another registry's sync may have created one of these
    # names since they were read. Those are skipped rather than failing this sync.
    Service.objects.bulk_create(
        [Service(name=name, registry=registry) for name in names], ignore_conflicts=True
    )
    return {s.name: s for s in Service.objects.filter(name__in=names)}


def _stored_instances(services: Iterable[Service]) -> dict[tuple[int, str], Instance]:
    """The stored instances of these services by (service pk, instance id), each with its
    service attached (they are at hand: not joined to every row)."""
    by_pk = {s.pk: s for s in services}
    stored = {}
    for row in Instance.objects.filter(service__in=list(by_pk)):
        _attach_service(row, by_pk[row.service_id])
        stored[(row.service_id, row.instance_id)] = row
    return stored


def _attach_service(row: Instance, service: Service) -> None:
    Instance.service.field.set_cached_value(row, service)


def _observe_listed(
    snapshot: Snapshot,
    services: dict[str, Service],
    stored: dict[tuple[int, str], Instance],
    seen: _Observation,
) -> set[tuple[int, str]]:
    """Every listed instance observed on its stored row, or on a new one; the keys listed."""
    listed = set()
    for name, instances in snapshot.items():
        service = services[name]
        for instance in instances:
            key = (service.pk, instance.instance_id)
            listed.add(key)
            row = stored.get(key)
            if row is None:
                routing_changed = _observe_new(service, instance, seen)
            else:
                routing_changed = _observe_stored(row, instance, seen)
            if routing_changed:
                seen.routable_changed.add(name)
    return listed


def _observe_new(service: Service, instance: RegistryInstance, seen: _Observation) -> bool:
    """A new row for `instance`; whether it is routable."""
    row = Instance(service_id=service.pk, instance_id=instance.instance_id, last_seen=seen.now)
    _attach_service(row, service)
    _observe(row, instance, seen.now, seen.default_version)
    seen.created.append(row)
    return row.state == ROUTABLE


def _observe_stored(row: Instance, instance: RegistryInstance, seen: _Observation) -> bool:
    """`instance` observed on its stored row, written only if that changed it; whether its
    routing changed."""
    before, was_routable = _state_key(row), _routing_view(row)
    if row.offline_intent and instance.enabled and seen.reapplies:
        seen.reapply.append(row)
    _observe(row, instance, seen.now, seen.default_version)
    if _state_key(row) == before:
        seen.unchanged += 1
        return False
    row.last_seen = seen.now
    seen.updated.append(row)
    return was_routable != _routing_view(row)


def _observe_unlisted(
    stored: dict[tuple[int, str], Instance],
    listed: set[tuple[int, str]],
    skipped: list[SkippedInstance],
    lists_disabled: bool,
    seen: _Observation,
) -> None:
    """The stored instances the registry did not list (and not DOWN already) are gone,
    unless their absence proves nothing: one was skipped as invalid, or it is disabled and
    the listing drops disabled instances."""
    # A skipped instance proves nothing about the stored row: leave it as it was. One
    # skipped without a readable id may be any stored row of its service.
    kept_ids = {(s.service, s.instance_id) for s in skipped if s.instance_id is not None}
    kept_services = {s.service for s in skipped if s.instance_id is None}
    for key, row in stored.items():
        if key in listed or row.state == Instance.DOWN:
            continue
        name = row.service.name
        if name in kept_services or (name, row.instance_id) in kept_ids:
            seen.unchanged += 1
        elif not lists_disabled and (row.offline_intent or not row.enabled):
            _end_unlisted_drain(row, seen)
        else:
            _mark_gone(row, seen)


def _end_unlisted_drain(row: Instance, seen: _Observation) -> None:
    """A disabled instance left out of the listing (a Nacos client listing drops them) is
    kept as it is, except that a drain an operator asked for ends on time."""
    drained = row.drain_until is not None and row.drain_until <= seen.now
    if row.offline_intent and row.state == Instance.DRAINING and drained:
        row.state = Instance.OFFLINE
        seen.updated.append(row)
    else:
        seen.unchanged += 1


def _mark_gone(row: Instance, seen: _Observation) -> None:
    if row.state == ROUTABLE:
        seen.routable_changed.add(row.service.name)
    row.state, row.healthy, row.note = Instance.DOWN, False, GONE_NOTE
    seen.gone.append(row)


def _write_instances(seen: _Observation) -> None:
    if seen.created:
        Instance.objects.bulk_create(seen.created, batch_size=INSERT_BATCH)
    if seen.updated or seen.gone:
        _update(seen.updated + seen.gone, WRITTEN_FIELDS)


def _summarise(seen: _Observation, summary: SyncSummary) -> None:
    summary.added, summary.changed = len(seen.created), len(seen.updated)
    summary.gone = len(seen.gone)
    summary.unchanged = seen.unchanged
    summary.routable_changed = seen.routable_changed


def _record_success(registry: Registry, summary: SyncSummary, now: datetime) -> None:
    Registry.objects.filter(pk=registry.pk).update(
        stale=False,
        last_error=validation.report(summary.skipped),
        skipped_instances=len(summary.skipped),
        last_sync_at=now,
        last_success_at=now,
    )


def _update(rows: list[Instance], names: list[str]) -> None:
    """``Instance.objects.bulk_update(rows, names)`` as one executemany of a by-id UPDATE.
    bulk_update builds a CASE WHEN per row and field in Python: many times slower for
    thousands of rows (measured when this replaced it; bench/README.md, sync)."""
    conn = transaction.get_connection()
    meta, ops = Instance._meta, conn.ops
    fields = [field for field in map(meta.get_field, names) if isinstance(field, Field)]
    columns = [ops.quote_name(field.column) for field in fields if field.column]
    assert len(columns) == len(names), f"not all of {names} are columns"
    sql = (
        f"UPDATE {ops.quote_name(meta.db_table)} SET "
        f"{', '.join(f'{column} = %s' for column in columns)} "
        f"WHERE {ops.quote_name(meta.pk.column)} = %s"
    )
    params = [[*(f.get_db_prep_save(getattr(row, f.attname), conn) for f in fields), row.pk]
              for row in rows]  # fmt: skip
    with conn.cursor() as cursor:
        cursor.executemany(sql, params)


def adapter_lists_disabled(adapter) -> bool:
    return getattr(adapter, "lists_disabled", True)


def _routing_view(row: Instance):
    if row.state != ROUTABLE:
        return None
    return tuple(getattr(row, name) for name in ROUTING_FIELDS)


def _observe(row: Instance, seen: RegistryInstance, now, default_version: str) -> None:
    row.host, row.port, row.cluster = seen.host, seen.port, seen.cluster
    row.version = usable_version(seen.metadata.get("version")) or default_version or None
    # With an offline intent the instance counts as disabled even while the registry says
    # otherwise: the sync is about to take it out again.
    row.healthy, row.weight = seen.healthy, seen.weight
    row.enabled = seen.enabled and not row.offline_intent
    row.metadata = dict(seen.metadata)
    row.state = observed_state(
        seen, offline_intent=row.offline_intent, drain_until=row.drain_until, now=now
    )
    if row.note == GONE_NOTE:
        row.note = ""


def _reapply_offline(adapter, row: Instance) -> None:
    """The registry shows enabled an instance an operator took offline (Nacos does after a
    re-registration): take it out again, and say so."""
    note = f"Offline re-applied at {timezone.now():%H:%M:%S} UTC: the registry showed it enabled."
    try:
        adapter.set_enabled(as_registry_instance(row), False)
    except RegistryError as exc:
        note = f"The registry shows it enabled; re-applying offline failed: {exc}"[:255]
        if row.note == note:
            # The same failure as last pass (a Consul instance of another node fails every
            # time): noted and audited once, not at every pass.
            return
    Instance.objects.filter(pk=row.pk).update(note=note[:255])
    audit_log.record(
        actor=SYNC_ACTOR,
        source="sync",
        action="instance.offline.reapplied",
        object_label=f"instance {row.service.name} {row.host}:{row.port}",
        before={"enabled": True},
        after={"enabled": False, "note": note},
    )


def _announce(summary: SyncSummary, rows: list[Instance]) -> None:
    announcements.routable_changed(summary.routable_changed)
    announcements.instances_changed(rows, registry=summary.registry)
