"""Sending the per-second metric samples to the dashboard (`POST /api/v1/metrics/`).

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

log = logging.getLogger(__name__)
METRICS_PATH = "/api/v1/metrics/"


class Reporter:
    def __init__(
        self,
        *,
        client: httpx.AsyncClient,
        metrics: Metrics,
        name: Callable[[], str | None],
        interval: float,
    ):
        self.client = client
        self.metrics = metrics
        self.name = name
        self.interval = interval
        self._trouble: str | None = None  # what was logged last, not logged again

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            await self.report()

    async def report(self) -> None:
        samples = self.metrics.flush()
        name = self.name()
        if not samples or name is None:
            return
        try:
            response = await self.client.post(
                METRICS_PATH, json={"gateway": name, "samples": samples}, timeout=5
            )
        except httpx.HTTPError as exc:
            self._troubled(f"the dashboard cannot be reached ({type(exc).__name__})")
            return
        if response.status_code == 404:
            self._troubled("the dashboard has no metrics endpoint (404)")
        elif response.status_code >= 300:
            self._troubled(f"the dashboard answered {response.status_code}: {response.text[:200]}")
        elif self._trouble is not None:
            log.info("Metric reports are taken again.")
            self._trouble = None

    def _troubled(self, reason: str) -> None:
        if reason != self._trouble:
            log.warning("Metric samples are dropped: %s.", reason)
            self._trouble = reason
