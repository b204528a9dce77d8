"""One sync of one registry: read everything first, then write only what changed, in bulk.

A registry that fails or times out changes nothing but its own stale flag: instances are
never deleted by a sync, and one missing from the registry becomes DOWN and is kept."""

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from dashboard.live import broadcast
from registry_sync.adapters import RegistryAdapter, RegistryError, RegistryInstance
from registry_sync.models import Instance, Registry, Service
from registry_sync.registries import adapter_for
from registry_sync.serializers import InstanceSerializer
from registry_sync.signals import routable_instances_changed
from registry_sync.states import ROUTABLE, as_registry_instance, observed_state
from releases.publishing import audit

log = logging.getLogger(__name__)

SYNC_ACTOR = "registry-sync"
LEASE_SECONDS = 120
# Beyond this many changed instances in one sync, browsers get one "reload" event instead
# of one event per instance.
MAX_INSTANCE_EVENTS = 100
WRITTEN_FIELDS = ["host", "port", "cluster", "version", "state", "healthy", "enabled",
                  "weight", "metadata", "note", "last_seen"]  # fmt: skip
ROUTING_FIELDS = ("host", "port", "version", "weight")
GONE_NOTE = "Gone from the registry."


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

    @property
    def rows_written(self) -> int:
        return self.added + self.changed + self.gone + self.services_added

    def __str__(self):
        return (
            f"{self.registry}: {self.added} added, {self.changed} changed, {self.gone} gone, "
            f"{self.unchanged} unchanged"
            + (f", offline re-applied to {self.reapplied}" if self.reapplied else "")
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


def read_registry(
    adapter: RegistryAdapter, progress: Callable[[int, int], None] | None = None
) -> dict[str, list[RegistryInstance]]:
    services = adapter.list_services()
    snapshot = {}
    for done, name in enumerate(services, start=1):
        snapshot[name] = adapter.list_instances(name)
        if progress:
            progress(done, len(services))
    return snapshot


def _mark_stale(registry: Registry, error: Exception) -> None:
    Registry.objects.filter(pk=registry.pk).update(
        stale=True, last_error=str(error)[:2000], last_sync_at=timezone.now()
    )


def sync_registry(
    registry: Registry,
    *,
    adapter: RegistryAdapter | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> SyncSummary:
    own_adapter = adapter is None
    adapter = adapter or adapter_for(registry)
    try:
        snapshot = read_registry(adapter, progress)
        summary, reapply = _apply(registry, snapshot, adapter)
        for row in reapply:
            _reapply_offline(adapter, row)
        summary.reapplied = len(reapply)
    except RegistryError as exc:
        log.warning("Registry %s is stale: %s", registry.name, exc)
        _mark_stale(registry, exc)
        raise SyncFailed(str(exc)) from exc
    finally:
        if own_adapter:
            adapter.close()
    return summary


def _state_key(row: Instance) -> tuple:
    return tuple(getattr(row, name) for name in WRITTEN_FIELDS if name != "last_seen")


def _apply(registry, snapshot, adapter) -> tuple[SyncSummary, list[Instance]]:
    now = timezone.now()
    summary = SyncSummary(registry=registry.name)
    events: list[Instance] = []
    reapply: list[Instance] = []
    with transaction.atomic():
        services = {
            s.name: s
            for s in Service.objects.filter(Q(name__in=list(snapshot)) | Q(registry=registry))
        }
        new_services = [Service(name=n, registry=registry) for n in snapshot if n not in services]
        if new_services:
            Service.objects.bulk_create(new_services)
            summary.services_added = len(new_services)
            services.update({s.name: s for s in Service.objects.filter(name__in=[
                s.name for s in new_services])})  # fmt: skip
        orphaned = [s.pk for s in services.values() if s.registry_id is None]
        if orphaned:
            Service.objects.filter(pk__in=orphaned).update(registry=registry)
        existing = {
            (row.service_id, row.instance_id): row
            for row in Instance.objects.filter(service__in=list(services.values())).select_related(
                "service"
            )
        }
        to_create, to_update = [], []
        seen_keys = set()
        for name, instances in snapshot.items():
            service = services[name]
            for seen in instances:
                key = (service.pk, seen.instance_id)
                seen_keys.add(key)
                row = existing.get(key)
                if row is None:
                    row = Instance(service=service, instance_id=seen.instance_id, last_seen=now)
                    _observe(row, seen, now)
                    to_create.append(row)
                    if row.state == ROUTABLE:
                        summary.routable_changed.add(name)
                    continue
                before_key, was_routable = _state_key(row), _routing_view(row)
                if row.offline_intent and seen.enabled:
                    reapply.append(row)
                _observe(row, seen, now)
                if _state_key(row) == before_key:
                    summary.unchanged += 1
                    continue
                row.last_seen = now
                to_update.append(row)
                if was_routable != _routing_view(row):
                    summary.routable_changed.add(name)
        gone = []
        for key, row in existing.items():
            if key in seen_keys or row.state == Instance.DOWN:
                continue
            hidden_because_disabled = not adapter_lists_disabled(adapter) and (
                row.offline_intent or not row.enabled
            )
            if hidden_because_disabled:
                # A Nacos client listing drops disabled instances; absence proves nothing.
                if row.offline_intent and row.state == Instance.DRAINING and row.drain_until <= now:
                    row.state = Instance.OFFLINE
                    to_update.append(row)
                else:
                    summary.unchanged += 1
                continue
            if row.state == ROUTABLE:
                summary.routable_changed.add(row.service.name)
            row.state, row.healthy, row.note = Instance.DOWN, False, GONE_NOTE
            gone.append(row)
        if to_create:
            Instance.objects.bulk_create(to_create, batch_size=1000)
        if to_update or gone:
            Instance.objects.bulk_update(to_update + gone, WRITTEN_FIELDS, batch_size=1000)
        summary.added, summary.changed, summary.gone = len(to_create), len(to_update), len(gone)
        Registry.objects.filter(pk=registry.pk).update(
            stale=False, last_error="", last_sync_at=now, last_success_at=now
        )
        events = to_create + to_update + gone
        transaction.on_commit(lambda: _announce(summary, events))
    return summary, reapply


def adapter_lists_disabled(adapter) -> bool:
    return getattr(adapter, "lists_disabled", True)


def _routing_view(row: Instance):
    if row.state != ROUTABLE:
        return None
    return tuple(getattr(row, name) for name in ROUTING_FIELDS)


def _observe(row: Instance, seen: RegistryInstance, now) -> None:
    row.host, row.port, row.cluster = seen.host, seen.port, seen.cluster
    row.version = str(seen.metadata.get("version", ""))[:64]
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
    Instance.objects.filter(pk=row.pk).update(note=note[:255])
    audit(
        actor=SYNC_ACTOR,
        source="sync",
        action="instance.offline.reapplied",
        object_label=f"instance {row.service.name} {row.host}:{row.port}",
        before={"enabled": True},
        after={"enabled": False, "note": note},
    )


def _announce(summary: SyncSummary, rows: list[Instance]) -> None:
    if summary.routable_changed:
        routable_instances_changed.send(sender=Instance, services=sorted(summary.routable_changed))
    if len(rows) > MAX_INSTANCE_EVENTS:
        broadcast("registry", {"registry": summary.registry, "changed": len(rows)})
        return
    for row in rows:
        broadcast("instance", {"service": row.service.name, **InstanceSerializer(row).data})
