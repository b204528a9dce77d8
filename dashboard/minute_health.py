"""Each service row's success over the last minute, per version (prod, then gray when it
differs), as the service tables show it before their first live update; static/js/overview.js
shows the live updates the same way. A rate counts from MIN_REQUESTS requests; the request
count is always shown, so "—" at a demo's few requests a minute says why."""

import time
from dataclasses import dataclass
from typing import Any

from metrics import live
from metrics.samples import Figures

MIN_REQUESTS = 50  # in the minute, for a success rate (data-min-requests for the live updates)
MINUTE = live.SPANS["1m"]
# Gray this many points below prod reads as worse (data-worse-points for the live updates).
WORSE_POINTS = 1.0
HEALTHY, WORSE, INSUFFICIENT = "healthy", "worse", "insufficient"


@dataclass(frozen=True)
class VersionHealth:
    version: str
    requests: int
    success_rate: float | None  # percent; None below MIN_REQUESTS


@dataclass(frozen=True)
class MinuteHealth:
    versions: list[VersionHealth]
    delta: float | None  # gray minus prod, points, when both have a rate

    @property
    def requests(self) -> int:
        return sum(health.requests for health in self.versions)

    @property
    def worse(self) -> bool:
        return self.delta is not None and self.delta < -WORSE_POINTS

    @property
    def state(self) -> str:
        """The overview's one word for the service: gray worse than prod, a version without
        enough requests to say, or healthy (static/js/at_a_glance.js decides alike)."""
        if self.worse:
            return WORSE
        if any(health.success_rate is None for health in self.versions):
            return INSUFFICIENT
        return HEALTHY


def _versions(row: dict[str, Any]) -> list[str]:
    prod, gray = row["prod_version"], row["gray_version"]
    return [prod] if gray == prod else [prod, gray]


def minute_health(rows: list[dict[str, Any]], now: int | None = None) -> dict[str, MinuteHealth]:
    """By service name: its versions' last minute, ending at `now` (default: this second)."""
    now = int(time.time()) if now is None else now
    series = [(row["name"], version) for row in rows for version in _versions(row)]
    figures = {one: Figures() for one in series}
    for one, seconds in live.store().seconds(series, now - MINUTE + 1, now).items():
        for _, total, errors, histogram in seconds:
            figures[one].add(total, errors, histogram)
    answer = {}
    for row in rows:
        versions = [
            VersionHealth(
                version=version,
                requests=(counted := figures[(row["name"], version)]).total,
                success_rate=counted.success_rate() if counted.total >= MIN_REQUESTS else None,
            )
            for version in _versions(row)
        ]
        rates = [health.success_rate for health in versions]
        delta = None
        if len(rates) == 2 and rates[0] is not None and rates[1] is not None:
            delta = rates[1] - rates[0]
        answer[row["name"]] = MinuteHealth(versions, delta)
    return answer
