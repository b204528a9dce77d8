"""The checks an interval is judged on besides the error-rate test, each a figure and a
verdict that the interval's event lists (releases/analysis.py judges with them).

Plain Python (no Django), like releases/analysis.py, so that bench/analysis.py runs them.

- p95: gray's p95 in the window against the absolute `max_p95_ms`.
- latency: gray's p95 minus prod's in the window, against `max_p95_increase_ms`.
  - Judged only when each version served at least max(min_requests, LATENCY_MIN_REQUESTS)
    requests in the window: the p95 of fewer rests on fewer than five requests above it,
    and one slow request moves it. Short of that it is `insufficient`: it neither fails
    the interval nor holds the step (at a 100 % step prod serves nothing; the error test
    still decides), and the event says so.
  - The p95s are kept in buckets 19 % wide (metrics/latency.py) and read as a bucket's
    top, so the increase is counted from the top of prod's bucket to the bottom of gray's:
    the least it can be. A version whose p95 sits one bucket above prod's by chance does
    not fail an interval; a real increase above the margin does.
- custom metrics: a PromQL template's value for the gray version (evaluated by
  releases/promql_checks.py) against its absolute `bound`; `fail_when` says on which side
  the value fails. No value (no series) is `insufficient`, an unreadable one (Prometheus
  down, a refused query) an `error`: either holds the step (never a silent pass) without
  failing the interval.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from metrics import latency as latency_buckets

PASS = "pass"
FAIL = "fail"
INCONCLUSIVE = "inconclusive"  # the error test: not yet shown within the margin
INSUFFICIENT = "insufficient"
ERROR = "error"

ERRORS, LATENCY, P95 = "errors", "latency", "p95"
# Names the analysis gives its own checks: a custom metric may not take them.
BUILT_IN = (ERRORS, LATENCY, P95)
LATENCY_MIN_REQUESTS = 100
ABOVE, BELOW = "above", "below"


@dataclass(frozen=True)
class Check:
    name: str
    verdict: str  # PASS, FAIL, INCONCLUSIVE, INSUFFICIENT or ERROR
    figure: float | None
    bound: float | None
    reason: str

    def as_detail(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "verdict": self.verdict,
            "figure": self.figure,
            "bound": self.bound,
            "reason": self.reason,
        }


def bucket_bottom(p95_ms: float) -> float:
    """The least a p95 read as `p95_ms` (a bucket's top) can be."""
    bucket = latency_buckets.bucket_of(p95_ms)
    return 0.0 if bucket <= latency_buckets.FIRST_BUCKET else latency_buckets.upper_edge(bucket - 1)


def p95_ceiling(max_p95_ms: float, gray_p95_ms: float | None) -> Check:
    """Gray's p95 over one window against the absolute `max_p95_ms`."""
    if gray_p95_ms is None:
        return Check(P95, INSUFFICIENT, None, max_p95_ms, "no gray p95 in the window")
    above = gray_p95_ms > max_p95_ms
    return Check(
        P95,
        FAIL if above else PASS,
        gray_p95_ms,
        max_p95_ms,
        f"gray p95 {gray_p95_ms} ms {'above' if above else 'within'} {max_p95_ms} ms",
    )


def latency(
    max_increase_ms: float,
    min_requests: int,
    *,
    gray_requests: int,
    gray_p95_ms: float | None,
    prod_requests: int,
    prod_p95_ms: float | None,
) -> Check:
    """Gray's p95 against prod's over one window."""
    floor = max(min_requests, LATENCY_MIN_REQUESTS)
    if gray_requests < floor or prod_requests < floor or gray_p95_ms is None or prod_p95_ms is None:
        return Check(
            LATENCY,
            INSUFFICIENT,
            None,
            max_increase_ms,
            f"p95 compared from {floor} requests of each version in the window "
            f"(gray {gray_requests}, prod {prod_requests})",
        )
    increase = round(gray_p95_ms - prod_p95_ms, 3)
    least = bucket_bottom(gray_p95_ms) - prod_p95_ms
    if least > max_increase_ms:
        return Check(
            LATENCY,
            FAIL,
            increase,
            max_increase_ms,
            f"gray p95 {gray_p95_ms} ms above prod's {prod_p95_ms} ms by more than "
            f"{max_increase_ms} ms",
        )
    return Check(
        LATENCY,
        PASS,
        increase,
        max_increase_ms,
        f"gray p95 {gray_p95_ms} ms, prod {prod_p95_ms} ms: within {max_increase_ms} ms",
    )


def bounded(metric: dict[str, Any], value: float | None) -> Check:
    """A custom metric's verdict on gray's `value` (None: the query answered no series)."""
    name, bound, side = metric["name"], metric["bound"], metric["fail_when"]
    if value is None:
        return Check(name, INSUFFICIENT, None, bound, f"{name}: no value for the gray version")
    fails = value > bound if side == ABOVE else value < bound
    return Check(
        name,
        FAIL if fails else PASS,
        value,
        bound,
        f"{name} {value:.6g} {side if fails else 'within'} {bound:g}"
        + ("" if fails else f" (fails {side})"),
    )
