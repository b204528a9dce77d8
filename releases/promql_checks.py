"""A release's custom metrics (`analysis.metrics`), read through the installation's
Prometheus source (metrics/promql_source.py) for the gray version at the end of an
interval. What cannot be read is an `error` check naming why, never a pass."""

from __future__ import annotations

from metrics import promql_source
from releases.metric_checks import ERROR, Check, bounded
from releases.models import Release

# What a custom metric's query may name; `{interval}` is the analysis interval as a PromQL
# duration (`60s`), for rates over the interval judged.
PLACEHOLDERS = ("service", "version", "lane", "interval")


def render(query: str, release: Release, interval_s: int) -> str:
    values = {
        "service": promql_source.quoted(release.service),
        "version": promql_source.quoted(release.to_version),
        "lane": promql_source.quoted(release.lane),
        "interval": f"{interval_s}s",
    }
    return promql_source.PLACEHOLDER.sub(lambda match: values[match.group(1)], query)


def unknown_placeholders(query: str) -> list[str]:
    return sorted(set(promql_source.PLACEHOLDER.findall(query)) - set(PLACEHOLDERS))


def evaluate(release: Release, metrics: list[dict], interval_s: int, at: int) -> list[Check]:
    """Each metric's check on gray's value at `at` (the end of the interval judged)."""
    source = promql_source.configured()
    checks = []
    for metric in metrics:
        name, bound = metric["name"], metric["bound"]
        if source is None:
            checks.append(Check(name, ERROR, None, bound, f"{name}: PROMETHEUS_URL is not set"))
            continue
        try:
            value = source.value(name, render(metric["query"], release, interval_s), at)
        except promql_source.PrometheusError as exc:
            checks.append(Check(name, ERROR, None, bound, f"{name}: {exc}"))
            continue
        checks.append(bounded(metric, value))
    return checks
