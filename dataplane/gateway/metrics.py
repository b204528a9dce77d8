"""What the gateway counts: per (service, version, lane) requests, errors and latency, in
one-second windows for the dashboard (`POST /api/v1/metrics/`, the contract's sample
shape) and as running totals in Prometheus text. The lane is that of a GRAY request ("gray"
for the gray lane); other requests have none, and their samples carry no `lane`.

An error is a 5xx answer or a failed proxy attempt the client saw (both are answered
with 5xx by the gateway). The per-request cost is a dict lookup and a list append; the
prometheus-client objects are made only when /metrics is read.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

Key = tuple[str, str, str | None]  # service, version, lane


def p95(latencies: list[float]) -> float:
    """The nearest-rank 95th percentile."""
    ordered = sorted(latencies)
    return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]


class Metrics:
    def __init__(self) -> None:
        self._window: dict[Key, list] = {}  # key -> [total, errors, [latency ms, ...]]
        self._window_start = time.time()
        self.totals: dict[Key, int] = {}
        self.errors: dict[Key, int] = {}
        self.latest_p95: dict[Key, float] = {}
        self.registry = CollectorRegistry(auto_describe=True)
        self.registry.register(_Collector(self))

    def record(
        self, service: str, version: str, error: bool, latency_ms: float, lane: str | None = None
    ) -> None:
        key = (service, version, lane)
        entry = self._window.get(key)
        if entry is None:
            entry = self._window[key] = [0, 0, []]
        entry[0] += 1
        if error:
            entry[1] += 1
        entry[2].append(latency_ms)

    def flush(self, now: float | None = None) -> list[dict]:
        """The samples of the window that ends now (the contract's shape), and a new one."""
        now = time.time() if now is None else now
        window, self._window = self._window, {}
        window_s = max(1, round(now - self._window_start))
        self._window_start = now
        samples = []
        for key, (total, errors, latencies) in window.items():
            service, version, lane = key
            self.totals[key] = self.totals.get(key, 0) + total
            self.errors[key] = self.errors.get(key, 0) + errors
            self.latest_p95[key] = latency = round(p95(latencies), 3)
            sample = {
                "service": service,
                "version": version,
                "ts": int(now),
                "window_s": window_s,
                "total": total,
                "errors": errors,
                "latency_ms_p95": latency,
            }
            if lane is not None:
                sample["lane"] = lane
            samples.append(sample)
        return samples

    def prometheus_text(self) -> bytes:
        return generate_latest(self.registry)


class _Collector:
    def __init__(self, metrics: Metrics):
        self.metrics = metrics

    def collect(self) -> Iterator:
        metrics = self.metrics
        # `lane` is empty for requests that are not GRAY: to Prometheus, no label at all.
        labels = ["service", "version", "lane"]
        requests = CounterMetricFamily(
            "graylane_gateway_requests",
            "Requests answered, per service, version and lane.",
            labels=labels,
        )
        errors = CounterMetricFamily(
            "graylane_gateway_errors",
            "5xx answers and failed proxy attempts seen by clients.",
            labels=labels,
        )
        latency = GaugeMetricFamily(
            "graylane_gateway_latency_p95_ms",
            "95th percentile latency of the last one-second window with traffic, in ms.",
            labels=labels,
        )
        for key, total in metrics.totals.items():
            service, version, lane = key
            values = [service, version, lane or ""]
            requests.add_metric(values, total)
            errors.add_metric(values, metrics.errors.get(key, 0))
            latency.add_metric(values, metrics.latest_p95.get(key, 0.0))
        yield from (requests, errors, latency)
