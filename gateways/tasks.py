"""Celery tasks: deliveries to push and Nacos gateways, and a periodic sweep."""

from datetime import datetime, timedelta

from celery import shared_task
from django.conf import settings
from django.db import OperationalError
from django.db.models import Q
from django.db.models.functions import Coalesce
from django.utils import timezone

from events.after_commit import best_effort
from gateways import delivery, generation, status_updates
from gateways.errors import DeliveryError
from gateways.gateway_document import build_document
from gateways.models import Gateway, Generation
from gateways.snapshot import Snapshot


@shared_task(
    acks_late=True,  # a worker killed mid-delivery leaves the task to another worker
    reject_on_worker_lost=True,
    autoretry_for=(DeliveryError, OperationalError),
    retry_backoff=True,
    retry_backoff_max=int(settings.GATEWAY_RETRY_MAX_DELAY),
    retry_jitter=True,
    max_retries=None,  # until delivered, or superseded by a newer generation's delivery
)
def deliver(generation: int, made_at: str, gateway_ids: list[int] | None = None) -> str:
    return delivery.deliver(generation, datetime.fromisoformat(made_at), gateway_ids)


@shared_task
def sweep() -> None:
    """Every GATEWAY_SWEEP_SECONDS (beat), what no event announces: a bump that failed
    after its change committed, a delivery whose task was lost (an in-memory broker
    restarted), a pull gateway turning stale; and old generations are forgotten."""
    now = timezone.now()
    newest = Generation.objects.order_by("-number").first()
    if newest is None:
        return
    generation.prune(now)
    rebuilt = build_document(newest.number)
    if (rebuilt["revision"], rebuilt["checksum"]) != (newest.revision, newest.checksum):
        generation.bump("repair: the live state differs from the newest generation")
        return  # the bump queues deliveries and updates the page itself
    forgotten_before = now - timedelta(
        seconds=2 * settings.GATEWAY_RETRY_MAX_DELAY + settings.GATEWAY_PUSH_TIMEOUT
    )
    forgotten = Gateway.objects.filter(
        mode__in=(Gateway.PUSH, Gateway.NACOS), acked_generation__lt=newest.number
    ).filter(
        Q(last_attempt_at__lt=forgotten_before)
        | Q(last_attempt_at__isnull=True, created_at__lt=forgotten_before)
    )
    enqueue(newest.number, newest.created_at, forgotten.values_list("pk", flat=True))
    stale_since = now - timedelta(seconds=settings.GATEWAY_STALE_SECONDS)
    turned_stale = Gateway.objects.annotate(seen=Coalesce("last_seen", "created_at")).filter(
        mode=Gateway.PULL,
        seen__lt=stale_since,
        seen__gte=stale_since - timedelta(seconds=settings.GATEWAY_SWEEP_SECONDS + 1),
    )
    status_updates.changed(*turned_stale.values_list("pk", flat=True))


def enqueue(number: int, made_at: datetime, gateway_ids=None) -> None:
    """Queue a delivery of generation `number` (made at `made_at`) to push and Nacos
    gateways (all, or these)."""
    if gateway_ids is None:
        if not Gateway.objects.filter(mode__in=(Gateway.PUSH, Gateway.NACOS)).exists():
            return  # pull gateways only: nothing for a task to do
    elif not gateway_ids:
        return
    ids = None if gateway_ids is None else list(gateway_ids)
    deliver.delay(number, made_at.isoformat(), ids)


def on_generation_made(sender, snapshot: Snapshot, **kwargs) -> None:
    best_effort(
        lambda: enqueue(snapshot.number, snapshot.created_at),
        f"queuing the delivery of generation {snapshot.number}",
    )
