"""Live events: what changed, for the browsers watching it.

Domain apps publish typed events here; the live websocket consumer (dashboard) subscribes
to GROUP and forwards each event as it is. This is the one module that knows the channel
layer and its group, so publishers need not know who listens, and the UI app is no one's
dependency. Payloads are plain JSON-ready dicts, built by the publishing app from its own
API serializers, so the page and the REST API show the same fields.
"""

from dataclasses import dataclass, field
from typing import ClassVar

from asgiref.sync import async_to_sync
from channels.layers import InMemoryChannelLayer, get_channel_layer

GROUP = "live"
# The consumer's handler method for MESSAGE_TYPE is `live_event`.
MESSAGE_TYPE = "live.event"


@dataclass(frozen=True)
class Event:
    kind: ClassVar[str]
    fields: dict = field(default_factory=dict)

    def as_json(self) -> dict:
        return {"type": self.kind, **self.fields}


@dataclass(frozen=True)
class InstanceChanged(Event):
    """One instance's API fields and its `service` name."""

    kind: ClassVar[str] = "instance"


@dataclass(frozen=True)
class RegistryChanged(Event):
    """Too many instances of a registry changed to list them (`registry`, `changed`)."""

    kind: ClassVar[str] = "registry"


@dataclass(frozen=True)
class GatewayStatusChanged(Event):
    """One gateway's status fields, as the gateways API shows them."""

    kind: ClassVar[str] = "gateway"


def watched() -> bool:
    """Whether a live page may be listening. False only when the channel layer can tell
    that nobody is (the in-memory layer holds its groups; Redis's layer cannot say), so
    that a publisher can skip building events that no one would receive. Safe from any
    thread."""
    layer = get_channel_layer()
    if layer is None:
        return False
    if isinstance(layer, InMemoryChannelLayer):
        return bool(layer.groups.get(GROUP))
    return True


def publish(*events: Event) -> None:
    """Send these events to every live page, in order, in one go (each async_to_sync call
    from a thread starts an event loop of its own). Without a channel layer, a no-op."""
    layer = get_channel_layer()
    if layer is None or not events:
        return
    async_to_sync(_send_all)(layer, events)


async def _send_all(layer, events) -> None:
    for event in events:
        await layer.group_send(GROUP, {"type": MESSAGE_TYPE, "event": event.as_json()})


async def subscribe(layer, channel_name: str) -> None:
    await layer.group_add(GROUP, channel_name)


async def unsubscribe(layer, channel_name: str) -> None:
    await layer.group_discard(GROUP, channel_name)
