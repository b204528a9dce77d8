"""The analysis of one interval of a release: is the gray version worse than prod?

Plain Python (no Django), so that the benchmark (bench/analysis.py) runs the very code the
beat job runs. The control plane owns it; gateways need none of it.

Each interval looks at two sets of figures of both versions over the same time span: the
interval's own window, and everything since the release started (the windows added up).

- Too few gray requests in the window (or, since the start, too few prod requests to
  compare with): `insufficient_data`. Never a verdict, never an advance.
- Otherwise two tests on the figures since the start, with the rates Agresti-Caffo
  adjusted (one error and one success added to each version, which keeps the variance
  sane with zero errors and small samples):
  - Wald's sequential probability ratio: how much likelier the figures are if gray's
    error rate exceeds prod's by twice the margin (the allowed increase) than if the two
    are equal; 1/ALPHA or more fails. It catches a small increase in much traffic within
    a few intervals.
  - A one-sided z test of "gray exceeds prod by more than the margin" (continuity
    corrected) at Z_ALPHA. It catches a large increase in little traffic, where the ratio
    against a fixed "twice the margin" grows slowly.
  Either: `failed`. `healthy` (the step advances) only when the opposite of the z test
  shows, at ADVANCE_CONFIDENCE, that gray is within the margin; in between:
  `inconclusive` (stay, gather more). A gray p95 above max_p95_ms in the window also
  fails the interval, and so do the checks of releases/metric_checks.py that fail: gray's
  p95 above prod's by more than max_p95_increase_ms, and custom metrics past their bound
  (a custom metric without a value holds the step).
- Failures beyond `failures_tolerated`: `rollback`.
- Each check is listed in the detail's `metrics` (name, figure, bound, verdict); an
  `insufficient_data` detail has a `hint`: from the rates seen, what interval or
  min_requests would give a verdict.

Why tests on the figures since the start: a per-interval test on 500 requests cannot
tell a 0.5 point increase from noise; the sum of the windows can. Looking again each
interval does not pile up false alarms: a healthy version's likelihood ratio ever reaches
1/ALPHA with probability at most ALPHA however often it is looked at (Wald's bound), and
the z test's margin pulls a healthy version's z further down at every look. The
margin is the sequential test's point of indifference: a version worse by less drifts
towards staying, one worse by more towards rollback (bench/analysis.py measures both).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from releases import metric_checks
from releases.metric_checks import Check

# The most often the sequential test fails an interval of a healthy version (gray as good
# as prod) over the whole release: it fails one at a likelihood ratio of 1/ALPHA.
ALPHA = 0.01
# The z test's level per look: it is there for large increases, which reach it anyway, so
# it adds little to ALPHA.
Z_ALPHA = 0.001
# A step advances once the figures show, at this confidence, that gray is not worse than
# prod by the margin or more (a non-inferiority test); short of that it waits.
ADVANCE_CONFIDENCE = 0.8

HEALTHY = "healthy"
INCONCLUSIVE = "inconclusive"
FAILED = "failed"
ROLLBACK = "rollback"
INSUFFICIENT_DATA = "insufficient_data"
# The longest interval a release may take (its analysis settings' bound).
MAX_INTERVAL_S = 300


@dataclass(frozen=True)
class Settings:
    interval_s: int = 60
    min_requests: int = 100
    max_error_rate_increase: float = 1.0  # percentage points
    failures_tolerated: int = 1
    max_p95_ms: float | None = None
    deadline_s: int = 3600
    max_p95_increase_ms: float | None = None
    # Custom metrics: [{"name", "query", "bound", "fail_when"}], evaluated by the caller.
    metrics: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def of(cls, analysis: dict[str, Any]) -> Settings:
        return cls(**analysis)


@dataclass
class Counts:
    total: int = 0
    errors: int = 0
    p95_ms: float | None = None

    @property
    def error_rate(self) -> float | None:
        return None if self.total <= 0 else self.errors / self.total

    def plus(self, other: Counts) -> Counts:
        return Counts(self.total + other.total, self.errors + other.errors, None)

    def as_detail(self) -> dict[str, Any]:
        rate = self.error_rate
        return {
            "requests": self.total,
            "errors": self.errors,
            "error_rate": None if rate is None else round(100 * rate, 4),
            "p95_ms": self.p95_ms,
        }


@dataclass(frozen=True)
class Test:
    difference: float  # observed error rate increase, adjusted, as a fraction
    likelihood_ratio: float  # P(figures | worse by twice the margin) / P(figures | equal)
    z: float
    p_value: float  # of H0 "not worse by more than the margin"
    p_not_worse: float  # of H0 "worse by the margin or more" (small: shown not worse)

    @property
    def fails(self) -> bool:
        return self.likelihood_ratio >= 1 / ALPHA or self.p_value <= Z_ALPHA


def normal_sf(z: float) -> float:
    """P(Z > z) for a standard normal Z."""
    return 0.5 * math.erfc(z / math.sqrt(2.0))


def compare(gray: Counts, prod: Counts, margin: float) -> Test:
    """Gray against prod on their figures so far, `margin` (a fraction, > 0) the allowed
    increase of gray's error rate."""
    n_g, n_p = gray.total + 2, prod.total + 2
    p_g, p_p = (gray.errors + 1) / n_g, (prod.errors + 1) / n_p
    variance = p_g * (1 - p_g) / n_g + p_p * (1 - p_p) / n_p
    se = math.sqrt(variance)
    difference = p_g - p_p
    # The difference is about normal with this variance: the log of the ratio of its
    # densities at "worse by 2 x margin" and at "equal".
    worse = 2 * margin
    log_ratio = worse * (difference - worse / 2) / variance
    correction = 0.5 * (1 / n_g + 1 / n_p)
    z = (difference - margin - correction) / se
    return Test(
        difference=difference,
        likelihood_ratio=math.exp(min(log_ratio, 700.0)),
        z=z,
        p_value=normal_sf(z),
        p_not_worse=normal_sf((margin - difference - correction) / se),
    )


@dataclass
class Verdict:
    outcome: str  # HEALTHY, INCONCLUSIVE, FAILED, ROLLBACK or INSUFFICIENT_DATA
    failures: int  # failed intervals so far, this one included
    detail: dict[str, Any] = field(default_factory=dict)

    @property
    def advances(self) -> bool:
        return self.outcome == HEALTHY


def judge(
    settings: Settings,
    *,
    window_gray: Counts,
    window_prod: Counts,
    since_start_gray: Counts,
    since_start_prod: Counts,
    failures: int,
    metrics: Sequence[Check] = (),
) -> Verdict:
    """The verdict on one interval. `since_start_*` include this window; `failures` are
    the failed intervals before it; `metrics` the custom metrics' checks of the window."""
    margin = settings.max_error_rate_increase / 100
    detail: dict[str, Any] = {
        "window": {"gray": window_gray.as_detail(), "prod": window_prod.as_detail()},
        "since_start": {"gray": since_start_gray.as_detail(), "prod": since_start_prod.as_detail()},
        "min_requests": settings.min_requests,
        "max_error_rate_increase": settings.max_error_rate_increase,
        "failures_tolerated": settings.failures_tolerated,
    }
    checks = _window_checks(settings, window_gray, window_prod) + list(metrics)
    short = None
    if window_gray.total < settings.min_requests:
        short = (
            f"{window_gray.total} gray requests in the window, fewer than {settings.min_requests}"
        )
    elif since_start_prod.total < settings.min_requests:
        short = (
            f"{since_start_prod.total} prod requests to compare with, "
            f"fewer than {settings.min_requests}"
        )
    if short:
        errors = Check(metric_checks.ERRORS, metric_checks.INSUFFICIENT, None, None, short)
        detail["metrics"] = [c.as_detail() for c in [errors, *checks]]
        detail["reason"] = short
        detail["hint"] = insufficient_hint(settings, window_gray, window_prod, since_start_prod)
        return Verdict(INSUFFICIENT_DATA, failures, detail)
    test = compare(since_start_gray, since_start_prod, margin)
    detail["test"] = {
        "name": "sequential probability ratio (Wald) and one-sided z, two proportions "
        "Agresti-Caffo adjusted",
        "increase_points": round(100 * test.difference, 4),
        "likelihood_ratio": float(f"{test.likelihood_ratio:.4g}"),
        "rollback_ratio": 1 / ALPHA,
        "z": round(test.z, 4),
        "p_value": round(test.p_value, 6),
        "alpha": Z_ALPHA,
        "p_not_worse": round(test.p_not_worse, 6),
        "advance_confidence": ADVANCE_CONFIDENCE,
    }
    errors = _error_check(test, settings.max_error_rate_increase)
    checks.insert(0, errors)
    detail["metrics"] = [c.as_detail() for c in checks]
    failed = [c for c in checks if c.verdict == metric_checks.FAIL]
    if failed:
        failures += 1
        detail["failed_metrics"] = [c.name for c in failed]
        detail["reason"] = "; ".join(c.reason for c in failed)
        outcome = ROLLBACK if failures > settings.failures_tolerated else FAILED
        return Verdict(outcome, failures, detail)
    # A custom metric that cannot be read keeps the step where it is: never a silent pass.
    unread = [c for c in metrics if c.verdict in (metric_checks.INSUFFICIENT, metric_checks.ERROR)]
    if errors.verdict == metric_checks.INCONCLUSIVE or unread:
        detail["reason"] = "; ".join([errors.reason] + [f"waiting for {c.reason}" for c in unread])
        return Verdict(INCONCLUSIVE, failures, detail)
    detail["reason"] = errors.reason
    return Verdict(HEALTHY, failures, detail)


def _error_check(test: Test, points: float) -> Check:
    """The error-rate test as a check: its figure the adjusted increase, in points."""
    if test.fails:
        verdict = metric_checks.FAIL
        reason = (
            f"error rate higher than prod by more than {points} points "
            f"(likelihood ratio {test.likelihood_ratio:.3g}, p={test.p_value:.4g})"
        )
    elif test.p_not_worse > 1 - ADVANCE_CONFIDENCE:
        verdict = metric_checks.INCONCLUSIVE
        reason = f"not yet shown within {points} points of prod: waiting"
    else:
        verdict = metric_checks.PASS
        reason = f"error rate within {points} points of prod"
    return Check(metric_checks.ERRORS, verdict, round(100 * test.difference, 4), points, reason)


def _window_checks(settings: Settings, gray: Counts, prod: Counts) -> list[Check]:
    """The latency checks the settings ask for, on the window's figures."""
    checks = []
    if settings.max_p95_ms is not None:
        checks.append(metric_checks.p95_ceiling(settings.max_p95_ms, gray.p95_ms))
    if settings.max_p95_increase_ms is not None:
        checks.append(
            metric_checks.latency(
                settings.max_p95_increase_ms,
                settings.min_requests,
                gray_requests=gray.total,
                gray_p95_ms=gray.p95_ms,
                prod_requests=prod.total,
                prod_p95_ms=prod.p95_ms,
            )
        )
    return checks


def insufficient_hint(
    settings: Settings, window_gray: Counts, window_prod: Counts, since_start_prod: Counts
) -> str:
    """What would give a verdict at the traffic of this window: a longer interval, a lower
    min_requests, or (prod short) how many more intervals."""
    interval = settings.interval_s
    if window_gray.total < settings.min_requests:
        if window_gray.total == 0:
            return (
                "no gray requests in the window: no interval decides until gray gets traffic "
                "(targeted users, or a step with a percentage)"
            )
        rate = window_gray.total / interval
        needed = math.ceil(settings.min_requests / rate)
        lower = f"min_requests {window_gray.total}"
        if needed > MAX_INTERVAL_S:
            return (
                f"at {rate:.3g} req/s on gray, {lower} would decide (an interval would need "
                f"{needed} s, above the {MAX_INTERVAL_S} s allowed)"
            )
        return f"at {rate:.3g} req/s on gray, an interval of {needed} s or {lower} would decide"
    missing = settings.min_requests - since_start_prod.total
    if window_prod.total == 0:
        return (
            f"no prod requests in the window: {missing} more are needed to compare with, "
            f"or min_requests {max(since_start_prod.total, 1)}"
        )
    rate = window_prod.total / interval
    more = math.ceil(missing / window_prod.total)
    return (
        f"at {rate:.3g} req/s on prod, {more} more interval{'s' if more > 1 else ''} "
        f"would decide, or min_requests {max(since_start_prod.total, 1)}"
    )
