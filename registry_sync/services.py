"""Taking an instance out of traffic and back, as graceful shutdown does it (lossless
deployment, docs/gray-release-design.md):
record the operator's intent, tell the registry, drain, then offline. Gateways hear of it
at once (not at the next sync).

Also creating, changing and deleting registries (audited, never with the password)."""

import logging
from collections.abc import Iterable
from datetime import timedelta
from urllib.parse import urlsplit, urlunsplit

from django.conf import settings
from django.db import transaction
from django.db.models import Count, Q
from django.utils import timezone

from audit import log as audit_log
from events.after_commit import after_commit, best_effort
from registry_sync import announcements
from registry_sync.adapters import RegistryError
from registry_sync.models import Instance, LifecycleEvent, Registry
from registry_sync.registries import adapter_for
from registry_sync.states import as_registry_instance
from registry_sync.tasks import finish_drain

log = logging.getLogger(__name__)


def _snapshot(row: Instance) -> dict:
    return {"state": row.state, "offline_intent": row.offline_intent, "enabled": row.enabled}


def _announce(row: Instance) -> None:
    announcements.routable_changed([row.service.name])
    announcements.instances_changed([row])


def _tell_registry(row: Instance, enabled: bool) -> None:
    """After the intent committed. A failing registry is noted for the operator (`row.note`
    too, for the answer) and retried by the sync, which re-applies the recorded intent."""
    registry = row.service.registry
    if registry is None:
        return
    adapter = adapter_for(registry)
    try:
        adapter.set_enabled(as_registry_instance(row), enabled)
    except RegistryError as exc:
        # Not in the note, which every viewer sees: why can tell what is at the address.
        log.warning("Registry %s not told about %s: %s", registry.name, row, exc)
        row.note = "Registry not updated yet (unreachable); the sync keeps retrying."
        Instance.objects.filter(pk=row.pk).update(note=row.note)
    finally:
        adapter.close()


def take_offline(instance_pk: int, *, actor: str, source: str) -> Instance:
    return _set_intent(instance_pk, offline=True, actor=actor, source=source)


def bring_online(instance_pk: int, *, actor: str, source: str) -> Instance:
    return _set_intent(instance_pk, offline=False, actor=actor, source=source)


def _set_intent(instance_pk: int, *, offline: bool, actor: str, source: str) -> Instance:
    drain = settings.DRAIN_SECONDS if offline else 0
    with transaction.atomic():
        row = (
            # of=self: PostgreSQL cannot lock the nullable side of the registry join.
            Instance.objects.select_for_update(of=("self",))
            .select_related("service__registry")
            .get(pk=instance_pk)
        )
        before = _snapshot(row)
        row.offline_intent = offline
        row.enabled = not offline
        row.note = ""
        if offline:
            row.state = Instance.DRAINING if drain > 0 else Instance.OFFLINE
            row.drain_until = timezone.now() + timedelta(seconds=drain)
        else:
            row.drain_until = None
            if row.state in (Instance.DRAINING, Instance.OFFLINE):
                row.state = Instance.UP if row.healthy else Instance.UNHEALTHY
        row.save()
        audit_log.record(
            actor=actor,
            source=source,
            action="instance.offline" if offline else "instance.online",
            object_label=f"instance {row.service.name} {row.host}:{row.port}",
            before=before,
            after=_snapshot(row),
        )
        transaction.on_commit(lambda: _announce(row))
        if drain > 0:
            # At drain_until, not in `drain` seconds: a queuing retried later keeps the time.
            after_commit(
                lambda: finish_drain.apply_async((row.pk,), eta=row.drain_until),
                f"queuing the end of the drain of {row}",
            )
    best_effort(lambda: _tell_registry(row, enabled=not offline), f"telling the registry of {row}")
    return row


REGISTRY_AUDITED_FIELDS = [
    "kind", "base_url", "namespace", "group", "api_version", "username", "sync_interval",
    "enabled", "default_version", "version_label", "kubeconfig", "datacenter", "version_key",
]  # fmt: skip
REGISTRY_SECRETS = ("password", "token")  # audited as has_/_changed, never their values


def _without_credentials(url: str) -> str:
    """Registries saved before URLs with credentials were refused may still hold one."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))


def _registry_view(registry: Registry) -> dict[str, object]:
    view: dict[str, object] = {"name": registry.name}
    view.update({field: getattr(registry, field) for field in REGISTRY_AUDITED_FIELDS})
    view["base_url"] = _without_credentials(registry.base_url)
    for secret in REGISTRY_SECRETS:
        view[f"has_{secret}"] = bool(getattr(registry, secret))
    return view


def _audit_registry(actor: str, action: str, registry: Registry, before, after) -> None:
    audit_log.record(
        actor=actor,
        source="api",
        action=action,
        object_label=f"registry {registry.name}",
        before=before,
        after=after,
    )


def create_registry(fields: dict, *, actor: str) -> Registry:
    with transaction.atomic():
        registry = Registry.objects.create(**fields)
        _audit_registry(actor, "registry.create", registry, None, _registry_view(registry))
    return registry


def update_registry(registry: Registry, fields: dict, *, actor: str) -> Registry:
    with transaction.atomic():
        before = _registry_view(registry)
        changed = [
            secret
            for secret in REGISTRY_SECRETS
            if secret in fields and fields[secret] != getattr(registry, secret)
        ]
        for field, value in fields.items():
            setattr(registry, field, value)
        registry.save()
        after = _registry_view(registry)
        for secret in changed:
            after[f"{secret}_changed"] = True
        _audit_registry(actor, "registry.update", registry, before, after)
    return registry


def delete_registry(registry: Registry, *, actor: str) -> None:
    with transaction.atomic():
        _audit_registry(actor, "registry.delete", registry, _registry_view(registry), None)
        registry.delete()


# -- lifecycle events (POST /api/v1/lifecycle/, the service page's timeline) -----------------

TIMELINE_LABELS = {
    "starting": "starting",
    "warmed_up": "warmed",
    "registered": "registered",
    "serving": "serving",
    "draining": "draining",
    "drained": "in-flight 0",
    "exited": "exited",
}
TIMELINE_EVENTS_READ = 500


def record_lifecycle_event(data: dict, *, reporter: str) -> LifecycleEvent:
    """Store the event; the service page's timeline gets it live."""
    # A transaction, as every use case's write: what graylane.outages counts as the change.
    with transaction.atomic():
        row = LifecycleEvent.objects.create(**data, reporter=reporter[:255])
    announcements.lifecycle_reported(row)
    return row


def lifecycle_events(service: str, since=None):
    rows = LifecycleEvent.objects.filter(service=service)
    if since is not None:
        rows = rows.filter(at__gte=since)
    return rows.order_by("-at", "-id")


def _step_label(row: LifecycleEvent) -> str:
    if row.event == "drained" and row.detail.get("in_flight"):
        return f"drain ended, {row.detail['in_flight']} in flight"
    return TIMELINE_LABELS[row.event]


def lifecycle_timelines(service: str) -> list[dict]:
    """Per instance address, its latest run (from its last `starting` on): each step with
    the seconds since the run began and since the step before; newest run first."""
    runs: dict[tuple[str, int], list[LifecycleEvent]] = {}
    recent = list(lifecycle_events(service)[:TIMELINE_EVENTS_READ])
    for row in reversed(recent):  # oldest first
        key = (row.host, row.port)
        if row.event == "starting" or key not in runs:
            runs[key] = []
        runs[key].append(row)
    timelines = []
    for (host, port), rows in runs.items():
        began, previous = rows[0].at, rows[0].at
        steps = []
        for row in rows:
            steps.append(
                {
                    "event": row.event,
                    "label": _step_label(row),
                    "at": row.at,
                    "since_start_s": (row.at - began).total_seconds(),
                    "step_s": (row.at - previous).total_seconds(),
                }
            )
            previous = row.at
        timelines.append(
            {
                "instance": f"{host}:{port}",
                "began": began,
                "steps": steps,
                "total_s": (previous - began).total_seconds(),
                "exited": rows[-1].event == "exited",
            }
        )
    return sorted(timelines, key=lambda timeline: timeline["began"], reverse=True)


def known_versions(services: Iterable[str]) -> dict[str, dict[str, int]]:
    """The versions the registries know of these services: those of their instance rows, in
    any state, each with how many of its instances are routable (UP); what the lane editor
    offers, and flags when none is."""
    known: dict[str, dict[str, int]] = {}
    rows = (
        Instance.objects.filter(service__name__in=list(services))
        .values_list("service__name", "version")
        .annotate(routable=Count("id", filter=Q(state=Instance.UP)))
        .order_by("service__name", "version")
    )
    for service, version, routable in rows:
        if version is not None:  # an instance without one takes ALL traffic only
            known.setdefault(service, {})[version] = routable
    return known
