import logging

from celery import shared_task
from django.utils import timezone

from registry_sync import consul_watch, draining
from registry_sync.models import Registry
from registry_sync.sync import SyncFailed, acquire_lease, release_lease, sync_registry

log = logging.getLogger(__name__)


@shared_task(ignore_result=True)
def sync_one(registry_id: int) -> None:
    registry = Registry.objects.filter(pk=registry_id, enabled=True).first()
    if registry is None or not acquire_lease(registry):
        return  # disabled, deleted, or a sync of it is still running: never overlap
    try:
        summary = sync_registry(registry)
        if summary.rows_written:
            log.info("Synced %s", summary)
    except SyncFailed:
        pass  # already recorded on the registry as stale; the next run retries
    finally:
        release_lease(registry)
    if registry.kind == Registry.CONSUL:
        consul_watch.keep_watching(registry, lambda: sync_one.delay(registry_id))


@shared_task(ignore_result=True)
def sync_due_registries() -> None:
    """Runs every second from beat; starts the sync of each registry whose own interval has
    passed. One beat entry serves any number of registries with their own intervals."""
    now = timezone.now()
    for registry in Registry.objects.filter(enabled=True).only(
        "pk", "sync_interval", "last_sync_at"
    ):
        last = registry.last_sync_at
        if last is None or (now - last).total_seconds() >= registry.sync_interval:
            sync_one.delay(registry.pk)


@shared_task(ignore_result=True)
def finish_drain(instance_id: int) -> None:
    draining.finish(instance_id)
