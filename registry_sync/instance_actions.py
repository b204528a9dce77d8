"""Taking an instance out of traffic and back, as the seed's graceful shutdown does it:
record the operator's intent, tell the registry, drain, then offline. Gateways hear of it
at once (not at the next sync)."""

from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from dashboard.live import broadcast
from registry_sync.adapters import RegistryError
from registry_sync.models import Instance
from registry_sync.registries import adapter_for
from registry_sync.serializers import InstanceSerializer
from registry_sync.signals import routable_instances_changed
from registry_sync.states import as_registry_instance
from releases.publishing import audit


def _snapshot(row: Instance) -> dict:
    return {"state": row.state, "offline_intent": row.offline_intent, "enabled": row.enabled}


def _broadcast(row: Instance) -> None:
    broadcast("instance", {"service": row.service.name, **InstanceSerializer(row).data})


def _announce(row: Instance) -> None:
    routable_instances_changed.send(sender=Instance, services=[row.service.name])
    _broadcast(row)


def _tell_registry(row: Instance, enabled: bool) -> str:
    """Returns a note for the operator; a failing registry is retried by the sync, which
    re-applies the recorded intent."""
    registry = row.service.registry
    if registry is None:
        return ""
    adapter = adapter_for(registry)
    try:
        adapter.set_enabled(as_registry_instance(row), enabled)
    except RegistryError as exc:
        return f"Registry not updated yet ({exc}); the sync keeps retrying."[:255]
    finally:
        adapter.close()
    return ""


def take_offline(instance_pk: int, *, actor: str, source: str) -> Instance:
    return _set_intent(instance_pk, offline=True, actor=actor, source=source)


def bring_online(instance_pk: int, *, actor: str, source: str) -> Instance:
    return _set_intent(instance_pk, offline=False, actor=actor, source=source)


def _set_intent(instance_pk: int, *, offline: bool, actor: str, source: str) -> Instance:
    from registry_sync.tasks import finish_drain

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
        audit(
            actor=actor,
            source=source,
            action="instance.offline" if offline else "instance.online",
            object_label=f"instance {row.service.name} {row.host}:{row.port}",
            before=before,
            after=_snapshot(row),
        )
        transaction.on_commit(lambda: _announce(row))
        if drain > 0:
            transaction.on_commit(lambda: finish_drain.apply_async((row.pk,), countdown=drain))
    note = _tell_registry(row, enabled=not offline)
    if note:
        Instance.objects.filter(pk=row.pk).update(note=note)
        row.note = note
    return row


def finish_drain_now(instance_pk: int) -> bool:
    """DRAINING → OFFLINE once the drain window is over (the sync does the same, in case
    this task is lost)."""
    with transaction.atomic():
        row = (
            Instance.objects.select_for_update()
            .select_related("service")
            .filter(pk=instance_pk, state=Instance.DRAINING, offline_intent=True)
            .first()
        )
        if row is None or (row.drain_until and row.drain_until > timezone.now()):
            return False
        row.state = Instance.OFFLINE
        row.save(update_fields=["state"])
        transaction.on_commit(lambda: _broadcast(row))
    return True
