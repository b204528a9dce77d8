"""Events for the live view: one group, typed messages (`metrics`, `instance`, `gateway`,
`release`), sent from jobs and request handlers through the channel layer."""

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

LIVE_GROUP = "live"


def broadcast(message_type: str, *payloads: dict) -> None:
    """One message per payload, all sent in one go (each async_to_sync call from a thread
    starts an event loop of its own)."""
    layer = get_channel_layer()
    if layer is None or not payloads:
        return
    async_to_sync(_send_all)(layer, message_type, payloads)


async def _send_all(layer, message_type: str, payloads) -> None:
    for payload in payloads:
        await layer.group_send(
            LIVE_GROUP, {"type": "live.event", "event": {"type": message_type, **payload}}
        )
