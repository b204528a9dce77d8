"""Bringing push and Nacos gateways to the newest generation, and recording what each
gateway runs (for all modes).

A new generation is delivered by one task to all push and Nacos gateways at once, in
parallel, their acks recorded in groups as they finish: a publish makes a burst of deliveries, and
one task per gateway meant as many task dispatches, reads and competing writes. A delivery
always sends the newest generation, whatever generation queued it: a delivery queued for
an older one that finds a newer one leaves it to the newer one's delivery, so an older
document never follows a newer one. Acks only move forward. A delivery that failed for
some gateways is retried (gateways.tasks) for those only: the others are no longer behind.
"""

import asyncio
import json
import logging
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime

from django.conf import settings

from gateways import generation, yaml_layout
from gateways.acks import record_acks, record_failure
from gateways.errors import DeliveryError
from gateways.models import Gateway
from gateways.nacos_config import NacosConfigClient, md5_hex
from gateways.push import event_loop, push
from gateways.snapshot import Snapshot
from registry_sync.adapters.base import RegistryError

log = logging.getLogger(__name__)
# Failures named in the task's error (all are recorded on their gateways).
FAILURES_SHOWN = 3


def deliver(number: int, made_at: datetime, gateway_ids=None) -> str:
    """One attempt to bring push and Nacos gateways (all, or these) that are behind to the
    newest generation (at least `number`); returns what happened, raises DeliveryError
    after recording the failures if any gateway failed."""
    snapshot = generation.current()
    if snapshot.number > number:
        return f"superseded by generation {snapshot.number}"
    if (snapshot.number, snapshot.created_at) != (number, made_at):
        # The database was reset (or restored) since this was queued: its generations are
        # not this one, and the newest has a delivery of its own.
        return f"generation {number} of {made_at.isoformat()} is gone"
    behind = Gateway.objects.filter(
        mode__in=(Gateway.PUSH, Gateway.NACOS), acked_generation__lt=snapshot.number
    )
    if gateway_ids is not None:
        behind = behind.filter(pk__in=gateway_ids)
    gateways = list(behind)
    if not gateways:
        return f"no gateway is behind generation {snapshot.number}"
    failures = []
    delivered = 0
    # A Nacos-mode gateway runs the reference design's filter, which knows the gray lane only.
    nacos_skipped = yaml_layout.left_out(json.loads(snapshot.body))
    for finished in _as_they_finish(gateways, snapshot):
        # Recorded as they come: a slow gateway does not hold up the others' acks.
        acks = {}
        for gateway, outcome in finished:
            if isinstance(outcome, DeliveryError):
                record_failure(gateway, str(outcome))
                failures.append(f"{gateway.name}: {outcome}")
            else:
                acks[gateway.pk] = outcome
        if acks:
            skipped = {
                gateway.pk: nacos_skipped
                for gateway, _ in finished
                if gateway.mode == Gateway.NACOS and gateway.pk in acks
            }
            record_acks(acks, delivered=True, skipped=skipped)
            delivered += len(acks)
    if failures:
        more = len(failures) - FAILURES_SHOWN
        shown = "; ".join(failures[:FAILURES_SHOWN]) + (f"; and {more} more" if more > 0 else "")
        raise DeliveryError(
            f"{len(failures)} of {len(gateways)} deliveries of generation {snapshot.number} "
            f"failed: {shown}"
        )
    return f"delivered generation {snapshot.number} to {delivered} gateways"


_executor: tuple[int, ThreadPoolExecutor] | None = None  # (pid, executor): new after a fork
_executor_lock = threading.Lock()


def _nacos_executor() -> ThreadPoolExecutor:
    global _executor
    with _executor_lock:
        if _executor is None or _executor[0] != os.getpid():
            pool = ThreadPoolExecutor(
                max_workers=settings.GATEWAY_PUSH_CONCURRENCY, thread_name_prefix="gateway-nacos"
            )
            _executor = (os.getpid(), pool)
        return _executor[1]


def _as_they_finish(gateways: list[Gateway], snapshot: Snapshot):
    """Delivers `snapshot` to all `gateways` at once; yields lists of (gateway, the
    generation it runs now or the DeliveryError saying why not), each with everything that
    finished since the last one. Pushes run on this thread's event loop; Nacos publishes (a
    blocking client) in a thread pool, their futures awaited on the same loop."""
    loop = event_loop()
    at_once = asyncio.Semaphore(settings.GATEWAY_PUSH_CONCURRENCY)

    async def push_one(gateway: Gateway) -> int:
        async with at_once:
            return await push(gateway, snapshot)

    pending: dict[asyncio.Future, Gateway] = {}
    for gateway in gateways:
        future: asyncio.Future
        if gateway.mode == Gateway.PUSH:
            future = loop.create_task(push_one(gateway))
        else:
            work = _nacos_executor().submit(_publish_to_nacos, gateway, snapshot)
            future = asyncio.wrap_future(work, loop=loop)
        pending[future] = gateway
    try:
        while pending:
            done, _ = loop.run_until_complete(
                asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            )
            yield [(pending.pop(future), _outcome(future, snapshot.number)) for future in done]
    finally:
        for future in pending:
            future.cancel()
        if pending:
            loop.run_until_complete(asyncio.wait(pending))


def _outcome(future: asyncio.Future, number: int) -> int | DeliveryError:
    """What a finished delivery brought: the generation the gateway runs, or why not (any
    other exception is a fault here, and raised)."""
    error = future.exception()
    if isinstance(error, DeliveryError):
        return error
    applied = future.result()
    if applied < number:
        return DeliveryError(
            f"The gateway answered that it runs generation {applied}, not {number}."
        )
    return applied


def _publish_to_nacos(gateway: Gateway, snapshot: Snapshot) -> int:
    content = yaml_layout.render(json.loads(snapshot.body), gateway.yaml_prefix)
    try:
        with NacosConfigClient(
            gateway.endpoint,
            username=gateway.nacos_username,
            password=gateway.nacos_password,
            timeout=settings.GATEWAY_PUSH_TIMEOUT,
            policy=settings.OUTBOUND_POLICY,
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
