"""Live events: what changed, for the browsers watching it.

Domain apps publish typed events here; the live websocket consumer (dashboard) subscribes
to GROUP and forwards each event as it is. This is the one module that knows the channel
layer and its groups, so publishers need not know who listens, and the UI app is no one's
dependency. Each event is typed: what mirrors an API serializer is the TypedDict of
events.payloads, filled by the publishing app from that serializer, so the page and the
REST API show the same fields.

Metrics updates are many (one per service and version every second) and each page wants a
few services only, so they go to one group per service, and to METRICS_ALL_GROUP for pages
that watch every service; every other event goes to GROUP, which every page is in.
"""

import asyncio
import hashlib
import os
import threading
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, ClassVar

import redis
from asgiref.sync import async_to_sync
from channels.layers import BaseChannelLayer, InMemoryChannelLayer, get_channel_layer
from channels_redis.pubsub import RedisPubSubChannelLayer

from events.after_commit import best_effort
from events.payloads import (
    GatewayStatusFields,
    InstanceFields,
    ReleaseEventFields,
    ReleaseFields,
    RevisionFields,
)

GROUP = "live"
METRICS_ALL_GROUP = "live.metrics.all"
# The consumer's handler method for MESSAGE_TYPE is `live_event`.
MESSAGE_TYPE = "live.event"


def metrics_group(service: str) -> str:
    """The group of one service's metrics updates. Group names allow few characters and a
    service name may hold any, hence a digest."""
    return "live.metrics." + hashlib.sha256(service.encode()).hexdigest()[:32]


class LiveEvent:
    """What a page receives: `{"type": kind, ...}`."""

    kind: ClassVar[str]

    def as_json(self) -> dict[str, Any]:
        raise NotImplementedError

    def groups(self) -> tuple[str, ...]:
        return (GROUP,)


@dataclass(frozen=True)
class InstanceChanged(LiveEvent):
    """One instance's API fields and its `service` name."""

    kind: ClassVar[str] = "instance"
    service: str
    instance: InstanceFields

    def as_json(self) -> dict[str, Any]:
        return {"type": self.kind, "service": self.service, **self.instance}


@dataclass(frozen=True)
class RegistryChanged(LiveEvent):
    """Too many instances of a registry changed to list them."""

    kind: ClassVar[str] = "registry"
    registry: str
    changed: int

    def as_json(self) -> dict[str, Any]:
        return {"type": self.kind, "registry": self.registry, "changed": self.changed}


@dataclass(frozen=True)
class GatewayStatusChanged(LiveEvent):
    """One gateway's status fields, as the gateways API shows them."""

    kind: ClassVar[str] = "gateway"
    gateway: GatewayStatusFields

    def as_json(self) -> dict[str, Any]:
        return {"type": self.kind, **self.gateway}


@dataclass(frozen=True)
class RevisionPublished(LiveEvent):
    """A new policy revision's fields, as the revisions API lists them, and its `diff`."""

    kind: ClassVar[str] = "revision"
    revision: RevisionFields
    diff: list[dict[str, Any]]

    def as_json(self) -> dict[str, Any]:
        return {"type": self.kind, **self.revision, "diff": self.diff}


@dataclass(frozen=True)
class ReleaseChanged(LiveEvent):
    """A release's API fields (`release`) and the event that changed it (`event`), as the
    releases API shows them."""

    kind: ClassVar[str] = "release"
    release: ReleaseFields
    event: ReleaseEventFields

    def as_json(self) -> dict[str, Any]:
        return {"type": self.kind, "release": dict(self.release), "event": dict(self.event)}


@dataclass(frozen=True)
class CallsRecorded(LiveEvent):
    """Calls made or taken by these services were recorded (call edges): the service graph
    has new figures."""

    kind: ClassVar[str] = "call_edges"
    services: tuple[str, ...]

    def as_json(self) -> dict[str, Any]:
        return {"type": self.kind, "services": list(self.services)}


@dataclass(frozen=True)
class FreezeChanged(LiveEvent):
    """A freeze window was made, ended or removed (`freeze`: its id)."""

    kind: ClassVar[str] = "freeze"
    freeze: int

    def as_json(self) -> dict[str, Any]:
        return {"type": self.kind, "freeze": self.freeze}


@dataclass(frozen=True)
class LifecycleReported(LiveEvent):
    """An instance of `service` reported a step of its lifecycle (`event`) at `instance`
    (host:port)."""

    kind: ClassVar[str] = "lifecycle"
    service: str
    instance: str
    event: str

    def as_json(self) -> dict[str, Any]:
        return {
            "type": self.kind,
            "service": self.service,
            "instance": self.instance,
            "event": self.event,
        }


@dataclass(frozen=True)
class MetricsWindow:
    """One series' figures over one sliding window. No requests: rates are None."""

    total: int
    errors: int
    success_rate: float | None  # percent
    rate_per_s: float
    latency_ms_p95: float | None


@dataclass(frozen=True)
class MetricsUpdated(LiveEvent):
    """A (service, version)'s live figures at second `ts` (windows "10s", "1m", "5m"
    ending there; the top-level figures are the 10 s window's). `at`: epoch seconds when
    they were read."""

    kind: ClassVar[str] = "metrics"
    service: str
    version: str
    ts: int
    at: float
    windows: dict[str, MetricsWindow]

    def as_json(self) -> dict[str, Any]:
        return {
            "type": self.kind,
            "service": self.service,
            "version": self.version,
            "ts": self.ts,
            "at": self.at,
            **asdict(self.windows["10s"]),
            "windows": {name: asdict(window) for name, window in self.windows.items()},
        }

    def groups(self) -> tuple[str, ...]:
        return (metrics_group(self.service), METRICS_ALL_GROUP)


def watched() -> bool:
    """Whether a live page may be listening. False only when the channel layer can tell
    that nobody is (the in-memory layer holds its groups; on Redis's pub/sub layer a group
    is a Redis channel, which Redis counts the subscribers of, whichever replica serves the
    page), so that a publisher can skip building events that no one would receive. Safe
    from any thread."""
    layer = get_channel_layer()
    if layer is None:
        return False
    if isinstance(layer, InMemoryChannelLayer):
        return bool(layer.groups.get(GROUP))
    if isinstance(layer, RedisPubSubChannelLayer):
        return _redis_subscribers(layer, GROUP) != 0
    return True


_redis_clients: dict[tuple[int, str], redis.Redis] = {}


def _redis_subscribers(layer: RedisPubSubChannelLayer, group: str) -> int | None:
    """How many subscribe to `group` on the layer's Redis hosts (a group lives on one of
    them); None when a host cannot say, so that the events are built all the same."""
    # channels_redis names a group's Redis channel so (RedisPubSubLoopLayer, per loop).
    channel = f"{layer._kwargs.get('prefix', 'asgi')}__group__{group}"
    total = 0
    for host in layer._kwargs.get("hosts") or ["redis://localhost:6379"]:
        url = host if isinstance(host, str) else host.get("address")
        if not isinstance(url, str):
            return None  # a host given as connection arguments: not asked
        client = _redis_clients.get((os.getpid(), url))
        if client is None:
            client = redis.Redis.from_url(url, socket_timeout=1)
            _redis_clients[(os.getpid(), url)] = client
        try:
            total += sum(count for _, count in client.pubsub_numsub(channel))
        except redis.RedisError:
            return None
    return total


def publish(*events: LiveEvent) -> None:
    """Send these events to every live page, in order, in one go (each async_to_sync call
    from a thread starts an event loop of its own). Without a channel layer, a no-op."""
    layer = get_channel_layer()
    if layer is None or not events:
        return
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        async_to_sync(_send_all)(layer, events)
        return
    # Sync code called from a thread whose event loop is running (a test driving a browser,
    # or sync code under an async caller): async_to_sync cannot run here, and waiting would
    # block that loop, so the events go from a thread of their own.
    threading.Thread(target=async_to_sync(_send_all), args=(layer, events), daemon=True).start()


def publish_best_effort(*events: LiveEvent) -> None:
    """publish() for a change already committed, best effort: events that cannot be sent
    yet (Redis) wait and are sent later, in order (events.after_commit)."""
    if events:
        kinds = ", ".join(sorted({event.kind for event in events}))
        best_effort(lambda: publish(*events), f"sending live events ({kinds})")


async def _send_all(layer: BaseChannelLayer, events: Sequence[LiveEvent]) -> None:
    for event in events:
        message = {"type": MESSAGE_TYPE, "event": event.as_json()}
        for group in event.groups():
            await layer.group_send(group, message)


async def subscribe(layer: BaseChannelLayer, channel_name: str) -> None:
    await layer.group_add(GROUP, channel_name)


async def unsubscribe(layer: BaseChannelLayer, channel_name: str) -> None:
    await layer.group_discard(GROUP, channel_name)


def metrics_groups(services: list[str]) -> set[str]:
    """The groups to be in for these services' metrics ("*": every service)."""
    if "*" in services:
        return {METRICS_ALL_GROUP}
    return {metrics_group(service) for service in services}


async def join(layer: BaseChannelLayer, channel_name: str, groups: set[str]) -> None:
    for group in groups:
        await layer.group_add(group, channel_name)


async def leave(layer: BaseChannelLayer, channel_name: str, groups: set[str]) -> None:
    for group in groups:
        await layer.group_discard(group, channel_name)
