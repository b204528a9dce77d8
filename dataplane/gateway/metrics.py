"""What the gateway counts: per (service, version, lane) requests, errors and latency, in
one-second windows for the dashboard (`POST /api/v1/metrics/`, the contract's sample
shape) and as running totals in Prometheus text: two counters and a latency histogram. The
lane is that of a GRAY request ("gray" for the gray lane); other requests have none, and
their samples carry no `lane`. Each sample also splits its requests and errors by the
instance that answered them (`instances`, by "host:port"), for the service page's
per-instance traffic.

An error is a 5xx answer or a failed proxy attempt the client saw (both are answered
with 5xx by the gateway). The per-request cost is a dict lookup and a list append: the
window's latencies are sorted once when it closes, which gives its p95 and, by bisection,
what each histogram bucket gains. The prometheus-client objects are made only when
/metrics is read.

The histogram, not a p95 per window, is what Prometheus gets because p95s cannot be merged:
the worst one-second p95 of a step is decided by whichever second was slowest, be it of two
requests, while buckets add up over seconds and gateways, so the step's p95 weighs each
request once (metrics/promql_source.py's default template).
"""

from __future__ import annotations

import math
import time
from bisect import bisect_right
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily

Key = tuple[str, str, str | None]  # service, version, lane

# The histogram's upper edges (`le`), in ms: every second edge of the dashboard's own latency
# histogram (metrics/latency.py, 2^(k/4) ms), so √2 apart, to three significant digits. From
# 62.5 µs, since a gateway on loopback answers in tenths of a millisecond, to 65.5 s, twice
# the default request timeout; slower requests are in +Inf only.
LATENCY_EDGES_MS = tuple(float(f"{2 ** (k / 2):.3g}") for k in range(-8, 33))
# Prometheus' unit is the second.
_LE = tuple(f"{edge / 1000:.3g}" for edge in LATENCY_EDGES_MS) + ("+Inf",)


def p95(latencies: list[float]) -> float:
    """The nearest-rank 95th percentile."""
    ordered = sorted(latencies)
    return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]


class Metrics:
    def __init__(self) -> None:
        # key -> [total, errors, [latency ms, ...], {instance address: [total, errors]}]
        self._window: dict[Key, list] = {}
        self._window_start = time.time()
        self.totals: dict[Key, int] = {}
        self.errors: dict[Key, int] = {}
        # Per key, the requests at or under each edge of LATENCY_EDGES_MS, since the start.
        self.latency_buckets: dict[Key, list[int]] = {}
        self.latency_sum_ms: dict[Key, float] = {}
        self.registry = CollectorRegistry(auto_describe=True)
        self.registry.register(_Collector(self))

    def record(
        self,
        service: str,
        version: str,
        error: bool,
        latency_ms: float,
        lane: str | None = None,
        address: str | None = None,
    ) -> None:
        """One request answered; `address` ("host:port"): the instance that answered it,
        None when none did (no routable instance)."""
        key = (service, version, lane)
        entry = self._window.get(key)
        if entry is None:
            entry = self._window[key] = [0, 0, [], {}]
        entry[0] += 1
        if error:
            entry[1] += 1
        entry[2].append(latency_ms)
        if address is not None:
            by_address = entry[3].get(address)
            if by_address is None:
                by_address = entry[3][address] = [0, 0]
            by_address[0] += 1
            if error:
                by_address[1] += 1

    def flush(self, now: float | None = None) -> list[dict]:
        """The samples of the window that ends now (the contract's shape), and a new one."""
        now = time.time() if now is None else now
        window, self._window = self._window, {}
        window_s = max(1, round(now - self._window_start))
        self._window_start = now
        samples = []
        for key, (total, errors, latencies, by_address) in window.items():
            service, version, lane = key
            self.totals[key] = self.totals.get(key, 0) + total
            self.errors[key] = self.errors.get(key, 0) + errors
            ordered = sorted(latencies)
            buckets = self.latency_buckets.get(key)
            if buckets is None:
                buckets = self.latency_buckets[key] = [0] * len(LATENCY_EDGES_MS)
            for index, edge in enumerate(LATENCY_EDGES_MS):
                buckets[index] += bisect_right(ordered, edge)
            self.latency_sum_ms[key] = self.latency_sum_ms.get(key, 0.0) + sum(ordered)
            sample = {
                "service": service,
                "version": version,
                "ts": int(now),
                "window_s": window_s,
                "total": total,
                "errors": errors,
                "latency_ms_p95": round(p95(ordered), 3),
            }
            if lane is not None:
                sample["lane"] = lane
            if by_address:
                sample["instances"] = [
                    {"address": address, "total": counts[0], "errors": counts[1]}
                    for address, counts in sorted(by_address.items())
                ]
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
        latency = HistogramMetricFamily(
            "graylane_gateway_latency_seconds",
            "Time from the request head to the end of the answer, in seconds.",
            labels=labels,
        )
        for key, total in metrics.totals.items():
            service, version, lane = key
            values = [service, version, lane or ""]
            requests.add_metric(values, total)
            errors.add_metric(values, metrics.errors.get(key, 0))
            # The +Inf bucket is every request (its count is the histogram's _count).
            counts = [*metrics.latency_buckets[key], total]
            latency.add_metric(
                values, list(zip(_LE, counts, strict=True)), metrics.latency_sum_ms[key] / 1000
            )
        yield from (requests, errors, latency)
