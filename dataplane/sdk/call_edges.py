"""The calls one service makes to others, counted per callee, version, lane and minute and
sent to the dashboard (`POST /api/v1/call-edges/`, a service token): what its bundle checks
and service graph read.

    edges = CallEdgeReporter("http://127.0.0.1:8000", token, service="user-app", version="V2")
    orders = ServiceBalancer(registry, "order-app", edges=edges)   # counts each call it makes
    ...
    await edges.aclose()   # at shutdown: what is counted is sent, within a bounded wait

Counting never holds a call up: it adds to a dict in memory, and a background task posts the
counts every `interval_s`. At most `max_edges` (edge, minute) counts are held: a call that
would need one more is not counted (`dropped` says how many calls were lost so). A post that
fails (the dashboard down, or answering 5xx) keeps its counts for the next one, the oldest
minutes given up first beyond `max_edges`; one the dashboard refuses (4xx) is dropped, since
sending it again cannot help. `dashboard`: its URL, or several (comma-separated or a list),
tried in turn (dataplane/dashboards.py).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence

import httpx

from dataplane.dashboards import dashboard_client, dashboard_urls

log = logging.getLogger(__name__)

CALL_EDGES_PATH = "/api/v1/call-edges/"
DEFAULT_INTERVAL_S = 10.0
# The dashboard takes at most this many samples per request: one post holds them all.
DEFAULT_MAX_EDGES = 1000

# (minute, callee, callee_version, lane) -> [calls, errors]
Key = tuple[int, str, str, str | None]


class CallEdgeReporter:
    def __init__(
        self,
        dashboard: str | Sequence[str],
        token: str,
        *,
        service: str,
        version: str,
        interval_s: float = DEFAULT_INTERVAL_S,
        max_edges: int = DEFAULT_MAX_EDGES,
        timeout: float = 2.0,
    ):
        self.dashboards, self._token = dashboard_urls(dashboard), token
        self.service, self.version = service, version
        self.interval_s = interval_s
        self.max_edges = max_edges
        self.dropped = 0  # calls not counted, or whose counts were given up
        self._timeout = timeout
        self._counts: dict[Key, list[int]] = {}
        self._task: asyncio.Task | None = None
        self._http: httpx.AsyncClient | None = None

    def count(self, callee: str, callee_version: str, lane: str | None, *, error: bool) -> None:
        """One call to `callee`, answered by an instance of `callee_version`, made for a
        request of `lane` (None: PROD or ALL); `error`: answered 5xx or not answered."""
        key = (int(time.time()) // 60 * 60, callee, callee_version, lane)
        counts = self._counts.get(key)
        if counts is None:
            if len(self._counts) >= self.max_edges:
                self.dropped += 1
                return
            counts = self._counts[key] = [0, 0]
        counts[0] += 1
        counts[1] += int(error)
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._send_every_interval())

    async def _send_every_interval(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            await self.send()

    async def send(self) -> bool:
        """Post what is counted; False when it is kept for the next time or refused."""
        if not self._counts:
            return True
        taken, self._counts = self._counts, {}
        samples = [
            {
                "caller": self.service,
                "caller_version": self.version,
                "callee": callee,
                "callee_version": callee_version,
                "lane": lane,
                "ts": minute,
                "total": total,
                "errors": errors,
            }
            for (minute, callee, callee_version, lane), (total, errors) in taken.items()
        ]
        if self._http is None:
            self._http = dashboard_client(self.dashboards, self._token, self._timeout)
        try:
            response = await self._http.post(CALL_EDGES_PATH, json={"samples": samples})
        except httpx.HTTPError as exc:
            log.warning("call edges not reported, kept for the next time: %r", exc)
            self._keep(taken)
            return False
        except asyncio.CancelledError:  # stopped while posting: not lost before aclose's send
            self._keep(taken)
            raise
        if response.status_code == 202:
            return True
        if response.status_code >= 500:
            log.warning("call edges not reported (%s), kept for the next time",
                        response.status_code)  # fmt: skip
            self._keep(taken)
        else:
            self.dropped += sum(total for total, _ in taken.values())
            log.warning("call edges refused: %s %s", response.status_code, response.text[:200])
        return False

    def _keep(self, taken: dict[Key, list[int]]) -> None:
        """Counts of a failed post back with those made since, the oldest minutes given up
        beyond `max_edges`."""
        for key, (total, errors) in self._counts.items():
            counts = taken.setdefault(key, [0, 0])
            counts[0] += total
            counts[1] += errors
        kept = sorted(taken, key=lambda key: key[0], reverse=True)[: self.max_edges]
        self.dropped += sum(taken[key][0] for key in set(taken) - set(kept))
        self._counts = {key: taken[key] for key in kept}

    async def aclose(self, timeout: float = 3.0) -> None:
        """Stop, sending what is counted (for up to `timeout` s)."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        try:
            await asyncio.wait_for(self.send(), timeout)
        except TimeoutError:
            log.warning("call edges still unsent after %.1f s: dropped", timeout)
        if self._http is not None:
            await self._http.aclose()
            self._http = None
