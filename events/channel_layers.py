import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

from channels.layers import InMemoryChannelLayer

T = TypeVar("T")


class InProcessChannelLayer(InMemoryChannelLayer):
    """The in-memory layer, made safe to send to from job threads (the default mode, with
    the Celery worker inside the web process).

    Its queues are asyncio.Queues awaited by consumers on the server's event loop. A job
    thread's broadcast runs on a loop of its own, and asyncio is not thread-safe: the put
    wakes the consumer's future without waking the server's loop, so the event waited until
    something else woke that loop (the server's next timer or request). Sends from another loop
    therefore run on the loop the consumers receive on."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._server_loop: asyncio.AbstractEventLoop | None = None

    async def _on_server_loop(self, coroutine: Coroutine[Any, Any, T]) -> T:
        loop = self._server_loop
        if loop is None or not loop.is_running() or loop is asyncio.get_running_loop():
            return await coroutine
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coroutine, loop))

    async def receive(self, channel: str) -> dict[str, Any]:
        self._server_loop = asyncio.get_running_loop()
        return await super().receive(channel)

    async def send(self, channel: str, message: dict[str, Any]) -> None:
        return await self._on_server_loop(super().send(channel, message))

    async def group_send(self, group: str, message: dict[str, Any]) -> None:
        return await self._on_server_loop(super().group_send(group, message))
