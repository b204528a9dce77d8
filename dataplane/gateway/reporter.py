"""Sending the per-second metric samples to the dashboard (`POST /api/v1/metrics/`), and the
shadow traffic's comparisons (`POST /api/v1/shadow-comparisons/`, shadow.py).

Samples are not kept for later: a window the dashboard did not take is dropped, so a long
outage costs no memory. A dashboard without the endpoint (404) or one that cannot be
reached is logged once when it starts, not every second.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import httpx

from dataplane.gateway.metrics import Metrics
from dataplane.gateway.shadow import ShadowStats

log = logging.getLogger(__name__)
METRICS_PATH = "/api/v1/metrics/"
SHADOW_PATH = "/api/v1/shadow-comparisons/"


class Reporter:
    def __init__(
        self,
        *,
        client: httpx.AsyncClient,
        metrics: Metrics,
        name: Callable[[], str | None],
        interval: float,
        shadow: ShadowStats | None = None,
    ):
        self.client = client
        self.metrics = metrics
        self.shadow = shadow
        self.name = name
        self.interval = interval
        self._trouble: str | None = None  # what was logged last, not logged again

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            await self.report()

    async def report(self) -> None:
        samples = self.metrics.flush()
        comparisons, dropped = self.shadow.flush() if self.shadow is not None else ([], 0)
        name = self.name()
        if name is None:
            return
        if samples:
            await self._post(METRICS_PATH, {"gateway": name, "samples": samples}, "metrics")
        if comparisons or dropped:
            body = {"gateway": name, "comparisons": comparisons, "dropped": dropped}
            await self._post(SHADOW_PATH, body, "shadow comparisons")

    async def _post(self, path: str, body: dict, what: str) -> None:
        try:
            response = await self.client.post(path, json=body, timeout=5)
        except httpx.HTTPError as exc:
            self._troubled(f"the dashboard cannot be reached ({type(exc).__name__})")
            return
        if response.status_code == 404:
            self._troubled(f"the dashboard has no {what} endpoint (404)")
        elif response.status_code >= 300:
            self._troubled(f"the dashboard answered {response.status_code}: {response.text[:200]}")
        elif self._trouble is not None:
            log.info("Metric reports are taken again.")
            self._trouble = None

    def _troubled(self, reason: str) -> None:
        if reason != self._trouble:
            log.warning("Metric samples are dropped: %s.", reason)
            self._trouble = reason
