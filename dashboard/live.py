"""Events for the live view: one group, typed messages (`metrics`, `instance`, `gateway`,
`release`), sent from jobs and request handlers through the channel layer."""

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

LIVE_GROUP = "live"


def broadcast(message_type: str, payload: dict) -> None:
    layer = get_channel_layer()
    if layer is None:
        return
    async_to_sync(layer.group_send)(
        LIVE_GROUP, {"type": "live.event", "event": {"type": message_type, **payload}}
    )
