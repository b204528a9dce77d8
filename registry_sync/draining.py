"""The end of a drain window: DRAINING → OFFLINE."""

from django.db import transaction
from django.utils import timezone

from registry_sync import announcements
from registry_sync.models import Instance


def finish(instance_pk: int) -> bool:
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
        transaction.on_commit(lambda: announcements.instances_changed([row]))
    return True
