"""Bringing push and Nacos gateways to the newest generation, and recording what each
gateway runs (for all modes).

A delivery always sends the newest generation, whatever generation queued it: a delivery
queued for an older one that finds a newer one leaves it to the newer one's delivery, so an
older document never follows a newer one. Acks only move forward.
"""

import json
import logging

from django.conf import settings
from django.db.models import F
from django.utils import timezone

from gateways import generation, live, yaml_layout
from gateways.errors import DeliveryError
from gateways.models import Gateway
from gateways.nacos_config import NacosConfigClient, md5_hex
from gateways.push import push
from registry_sync.adapters.base import RegistryError

log = logging.getLogger(__name__)
MAX_ERROR_LENGTH = 2000


def enqueue(number: int, gateway_ids=None) -> None:
    """Queue a delivery of generation `number` to push and Nacos gateways (all, or these)."""
    from gateways.tasks import deliver

    gateways = Gateway.objects.filter(mode__in=(Gateway.PUSH, Gateway.NACOS))
    if gateway_ids is not None:
        gateways = gateways.filter(pk__in=gateway_ids)
    for gateway_id in gateways.values_list("pk", flat=True):
        deliver.delay(gateway_id, number)


def deliver(gateway_id: int, number: int) -> str:
    """One attempt to bring a gateway to the newest generation (at least `number`); returns
    what happened, raises DeliveryError after recording the failure."""
    gateway = Gateway.objects.filter(pk=gateway_id).first()
    if gateway is None or not gateway.delivered_by_us:
        return "not a push or nacos gateway (any more)"
    snapshot = generation.current()
    if snapshot.number > number:
        return f"superseded by generation {snapshot.number}"
    if gateway.acked_generation >= snapshot.number:
        return f"already at generation {gateway.acked_generation}"
    try:
        if gateway.mode == Gateway.PUSH:
            applied = push(gateway, snapshot)
        else:
            applied = _publish_to_nacos(gateway, snapshot)
        if applied < snapshot.number:
            raise DeliveryError(
                f"The gateway answered that it runs generation {applied}, not {snapshot.number}."
            )
    except DeliveryError as exc:
        record_failure(gateway, str(exc))
        raise
    record_ack(gateway, applied, delivered=True)
    return f"delivered generation {snapshot.number}"


def _publish_to_nacos(gateway: Gateway, snapshot: generation.Snapshot) -> int:
    content = yaml_layout.render(json.loads(snapshot.body), gateway.yaml_prefix)
    try:
        with NacosConfigClient(
            gateway.endpoint,
            username=gateway.nacos_username,
            password=gateway.nacos_password,
            timeout=settings.GATEWAY_PUSH_TIMEOUT,
        ) as nacos:
            nacos.publish(gateway.data_id, gateway.group, gateway.namespace, content)
            stored = nacos.stored_md5(gateway.data_id, gateway.group, gateway.namespace)
    except (RegistryError, ValueError) as exc:
        raise DeliveryError(str(exc)) from exc
    expected = md5_hex(content.encode())
    if stored != expected:
        raise DeliveryError(
            f"Nacos holds other content for {gateway.data_id} after publishing "
            f"(md5 {stored}, expected {expected})."
        )
    return snapshot.number


def record_ack(gateway: Gateway, number: int, *, delivered: bool = False) -> None:
    """The gateway runs generation `number` (an older ack than the last one changes nothing
    but `last_seen`). `delivered`: the ack is the answer to our delivery attempt."""
    now = timezone.now()
    attempt = {"last_attempt_at": now} if delivered else {}
    moved = Gateway.objects.filter(pk=gateway.pk, acked_generation__lt=number).update(
        acked_generation=number, acked_at=now, last_seen=now, last_error="", attempts=0, **attempt
    )
    if not moved:
        Gateway.objects.filter(pk=gateway.pk).update(last_seen=now, **attempt)
    live.changed(gateway.pk)


def record_failure(gateway: Gateway, message: str) -> None:
    log.warning("Delivery to gateway %s failed: %s", gateway.name, message)
    Gateway.objects.filter(pk=gateway.pk).update(
        last_error=message[:MAX_ERROR_LENGTH],
        attempts=F("attempts") + 1,
        last_attempt_at=timezone.now(),
    )
    live.changed(gateway.pk)
