import asyncio
import logging
from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.conf import settings

import events
from accounts.roles import role_of
from routing_engine import bounded_json

log = logging.getLogger(__name__)

# Close codes (docs/api.md: Live stream).
NOT_SIGNED_IN, NO_ROLE, TOO_SLOW = 4401, 4403, 4429
MAX_SUBSCRIBED = 200


class LiveConsumer(AsyncJsonWebsocketConsumer):
    """Pushes live events to signed-in viewers; anonymous sockets are refused.

    Every page gets instance, registry, gateway and release events; `metrics` updates only
    for the services it subscribed to (`{"subscribe": ["user-app"]}`, `["*"]` for all).
    Events wait in a bounded queue of this socket's own, written out by a task of its own:
    the channel layer hands each event over at once, and a browser that cannot keep up
    fills its queue and is dropped (close code 4429) instead of holding up the others or
    growing the server's memory."""

    async def connect(self) -> None:
        self.metrics_groups: set[str] = set()
        self.outbox: asyncio.Queue = asyncio.Queue(maxsize=settings.LIVE_CLIENT_QUEUE)
        self.writer: asyncio.Task | None = None
        self.dropping: asyncio.Task | None = None
        # Accept, then close with a reason: a refused handshake would hide the code from
        # the browser, which would then keep reconnecting.
        await self.accept()
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=NOT_SIGNED_IN)
            return
        if await database_sync_to_async(role_of)(user) is None:
            await self.close(code=NO_ROLE)
            return
        self.writer = asyncio.create_task(self._write_out())
        await events.subscribe(self.channel_layer, self.channel_name)

    async def disconnect(self, code: int) -> None:
        await self._leave_everything()

    async def _leave_everything(self) -> None:
        if self.writer is not None:
            self.writer.cancel()
            self.writer = None
        await events.unsubscribe(self.channel_layer, self.channel_name)
        await events.leave(self.channel_layer, self.channel_name, self.metrics_groups)
        self.metrics_groups = set()

    async def receive(
        self, text_data: str | None = None, bytes_data: bytes | None = None, **kwargs: Any
    ) -> None:
        """Only a text frame of JSON can be a subscription; any other frame (binary, not
        JSON, nested too deep) is answered as a wrong subscription would be, and dropped:
        the socket stays open."""
        try:
            content = None if text_data is None else bounded_json.loads(text_data)
        except ValueError:
            content = None
        await self.receive_json(content)

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        if self.writer is None:
            return
        services = content.get("subscribe") if isinstance(content, dict) else None
        if (
            not isinstance(services, list)
            or len(services) > MAX_SUBSCRIBED
            or not all(isinstance(name, str) and 0 < len(name) <= 255 for name in services)
        ):
            self._queue(
                {
                    "type": "error",
                    "detail": 'Expected {"subscribe": [service names]} (at most '
                    f'{MAX_SUBSCRIBED}; ["*"] for every service).',
                }
            )
            return
        wanted = events.metrics_groups(services)
        await events.leave(self.channel_layer, self.channel_name, self.metrics_groups - wanted)
        await events.join(self.channel_layer, self.channel_name, wanted - self.metrics_groups)
        self.metrics_groups = wanted
        self._queue({"type": "subscribed", "services": sorted(set(services))})

    async def live_event(self, message: dict[str, Any]) -> None:
        self._queue(message["event"])

    def _queue(self, event: dict) -> None:
        if self.dropping is not None:
            return
        try:
            self.outbox.put_nowait(event)
        except asyncio.QueueFull:
            log.warning(
                "Live client %s fell %s events behind: dropped.",
                self.channel_name,
                self.outbox.maxsize,
            )
            self.dropping = asyncio.create_task(self._drop())

    async def _drop(self) -> None:
        await self._leave_everything()
        await self.close(code=TOO_SLOW)

    async def _write_out(self) -> None:
        while True:
            await self.send_json(await self.outbox.get())
