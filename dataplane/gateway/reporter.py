"""Sending the per-second metric samples to the dashboard (`POST /api/v1/metrics/`), the
sampled requests (`POST /api/v1/traffic-samples/`, sampling.py) and shadow traffic's
comparisons (`POST /api/v1/shadow-comparisons/`, shadow.py) on the same loop and client.

Metric samples and comparisons are not kept for later: a window the dashboard did not take
is dropped, so a long outage costs no memory. Sampled requests the dashboard could not take
(unreachable, or a 5xx) are sent again, as long as the sampler's bounded buffer keeps them;
those it refused (another 4xx) are dropped. A dashboard without an endpoint (404) or one
that cannot be reached is logged once when it starts, not every second.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import httpx

from dataplane.gateway.metrics import Metrics
from dataplane.gateway.sampling import Sampler
from dataplane.gateway.shadow import ShadowStats

log = logging.getLogger(__name__)
METRICS_PATH = "/api/v1/metrics/"
SAMPLES_PATH = "/api/v1/traffic-samples/"
SHADOW_PATH = "/api/v1/shadow-comparisons/"
# Per path: what is sent, what becomes of it when it is not taken, the endpoint's name.
_TOLD = {
    METRICS_PATH: ("Metric samples", "are dropped", "metrics"),
    SAMPLES_PATH: ("Sampled requests", "are not taken", "traffic-samples"),
    SHADOW_PATH: ("Shadow comparisons", "are dropped", "shadow-comparisons"),
}


class Reporter:
    def __init__(
        self,
        *,
        client: httpx.AsyncClient,
        metrics: Metrics,
        name: Callable[[], str | None],
        interval: float,
        sampler: Sampler | None = None,
        shadow: ShadowStats | None = None,
    ):
        self.client = client
        self.metrics = metrics
        self.name = name
        self.interval = interval
        self.sampler = sampler
        self.shadow = shadow
        # Per path, what was logged last, not logged again.
        self._trouble: dict[str, str | None] = dict.fromkeys(_TOLD)

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            await self.report()
            if self.sampler is not None:
                await self.report_samples(self.sampler)

    async def report(self) -> None:
        samples = self.metrics.flush()
        comparisons, dropped = self.shadow.flush() if self.shadow is not None else ([], 0)
        name = self.name()
        if name is None:
            return
        if samples:
            await self._post(METRICS_PATH, {"gateway": name, "samples": samples})
        if comparisons or dropped:
            body = {"gateway": name, "comparisons": comparisons, "dropped": dropped}
            await self._post(SHADOW_PATH, body)

    async def report_samples(self, sampler: Sampler) -> None:
        """Send what waits, a batch at a time, until the dashboard does not take one."""
        name = self.name()
        while name is not None and sampler.waiting:
            batch = sampler.take()
            status = await self._post(SAMPLES_PATH, {"gateway": name, "samples": batch})
            if status is None or status >= 500:
                sampler.put_back(batch)
                return
            sampler.sent(batch)
            if status >= 300:
                return

    async def _post(self, path: str, body: dict) -> int | None:
        """The dashboard's status, or None when it could not be reached."""
        try:
            response = await self.client.post(path, json=body, timeout=5)
        except httpx.HTTPError as exc:
            self._troubled(path, f"the dashboard cannot be reached ({type(exc).__name__})")
            return None
        if response.status_code == 404:
            self._troubled(path, f"the dashboard has no {_TOLD[path][2]} endpoint (404)")
        elif response.status_code >= 300:
            self._troubled(
                path, f"the dashboard answered {response.status_code}: {response.text[:200]}"
            )
        elif self._trouble[path] is not None:
            log.info("%s are taken again.", _TOLD[path][0])
            self._trouble[path] = None
        return response.status_code

    def _troubled(self, path: str, reason: str) -> None:
        if reason != self._trouble[path]:
            what, fate, _ = _TOLD[path]
            log.warning("%s %s: %s.", what, fate, reason)
            self._trouble[path] = reason
