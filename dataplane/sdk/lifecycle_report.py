"""Lifecycle events of one instance, sent to the dashboard (`POST /api/v1/lifecycle/`, a
service or gateway token) in the order they happened.

Sending never holds the instance up: events queue in memory and a background task posts
them; a dashboard that is down costs a warning per event, not a slower start or a stuck
shutdown (`flush` waits a bounded time at exit). `dashboard`: its URL, or several
(comma-separated or a list), tried in turn (dataplane/dashboards.py).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import httpx

from dataplane.dashboards import dashboard_client, dashboard_urls

log = logging.getLogger(__name__)

EVENTS = ("starting", "warmed_up", "registered", "serving", "draining", "drained", "exited")
LIFECYCLE_PATH = "/api/v1/lifecycle/"


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class LifecycleReporter:
    def __init__(
        self,
        dashboard: str | Sequence[str],
        token: str,
        *,
        service: str,
        host: str,
        port: int,
        timeout=2.0,
    ):
        self.dashboards, self._token = dashboard_urls(dashboard), token
        self.service, self.host, self.port = service, host, port
        self._timeout = timeout
        self._queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        self._task: asyncio.Task | None = None

    def report(self, event: str, **detail: Any) -> None:
        if event not in EVENTS:
            raise ValueError(f"unknown lifecycle event {event!r}")
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._send_all())
        body = {
            "service": self.service,
            "host": self.host,
            "port": self.port,
            "event": event,
            "at": utc_now(),
            "detail": detail,
        }
        self._queue.put_nowait(body)

    async def _send_all(self) -> None:
        async with dashboard_client(self.dashboards, self._token, self._timeout) as client:
            while (body := await self._queue.get()) is not None:
                try:
                    response = await client.post(LIFECYCLE_PATH, json=body)
                except httpx.HTTPError as exc:
                    log.warning("lifecycle %s not reported: %r", body["event"], exc)
                    continue
                if response.status_code != 202:
                    log.warning(
                        "lifecycle %s refused: %s %s",
                        body["event"],
                        response.status_code,
                        response.text[:200],
                    )

    async def flush(self, timeout: float = 3.0) -> None:
        """Send what is queued (up to `timeout` s), then stop."""
        if self._task is None:
            return
        self._queue.put_nowait(None)
        try:
            await asyncio.wait_for(asyncio.shield(self._task), timeout)
        except TimeoutError:
            log.warning("lifecycle events still unsent after %.1f s: dropped", timeout)
            self._task.cancel()
