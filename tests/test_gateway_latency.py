"""The latency a gateway measures is the one its requests took: above zero and below what the
client saw, to a fraction of a millisecond on loopback, and at least the upstream's delay
when the upstream is slow. A real gateway process counts each request in the latency
histogram of its /-/metrics, which Prometheus scrapes (tests/test_prometheus_source.py)."""

import math
import time

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from dataplane.gateway.metrics import LATENCY_EDGES_MS
from testing.gateway_lab import SLOW_SECONDS, SLOW_SUFFIX
from testing.waiting import wait_until
from tests.test_gateway_routing import SEED_RULES

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def histogram(gateway, version: str, requests: int) -> tuple[dict[float, float], float]:
    """The gateway's histogram of `version` (one lane per version in these tests) once it
    counts `requests` (the gateway adds a window to it when the window closes, each second):
    {upper edge in ms: requests at or under it}, and the sum of their latencies in ms."""

    def read() -> tuple[dict[float, float], float] | None:
        text = httpx.get(gateway.url + "/-/metrics", timeout=2).text
        samples = [
            sample
            for family in text_string_to_metric_families(text)
            if family.name == "graylane_gateway_latency_seconds"
            for sample in family.samples
            if sample.labels["version"] == version
        ]
        count = next((s.value for s in samples if s.name.endswith("_count")), 0)
        if count != requests:
            return None
        # Rounded, so that the edges read back are those of LATENCY_EDGES_MS (+Inf: inf).
        buckets = {
            round(1000 * float(s.labels["le"]), 6): s.value
            for s in samples
            if s.name.endswith("_bucket")
        }
        return buckets, 1000 * next(s.value for s in samples if s.name.endswith("_sum"))

    return wait_until(read, 10, f"the gateway's histogram to count {requests} requests")


def bucket_top(latency_ms: float) -> float:
    """The upper edge of the gateway's histogram bucket that holds `latency_ms` (inf above
    the last)."""
    return next((edge for edge in LATENCY_EDGES_MS if latency_ms <= edge), math.inf)


def timed_requests(gateway, path: str, count: int) -> list[float]:
    """Each request's time as the client saw it, in ms, over one kept-alive connection."""
    seen = []
    with httpx.Client(base_url=gateway.url, timeout=5) as client:
        for _ in range(count):
            started = time.perf_counter()
            assert client.get(path).status_code == 200
            seen.append(1000 * (time.perf_counter() - started))
    return seen


def test_sub_millisecond_requests_are_measured_to_a_fraction_of_a_millisecond(lab):
    lab.instance("user-app", "V1")
    lab.sync()
    lab.policy(**SEED_RULES)
    gateway = lab.start_gateway()
    client_ms = []
    for _ in range(3):  # three windows
        client_ms += timed_requests(gateway, "/user-app/hello", 60)
        time.sleep(1.1)
    buckets, sum_ms = histogram(gateway, "V1", len(client_ms))
    # Each request took the gateway less time than the client that sent it: none lies above
    # the bucket of the slowest the client saw, and together they took less.
    assert buckets[bucket_top(max(client_ms))] == len(client_ms), (buckets, max(client_ms))
    assert 0 < sum_ms < sum(client_ms), (sum_ms, sum(client_ms))
    # A millisecond clock (the event loop's) would add up to whole milliseconds.
    assert abs(sum_ms - round(sum_ms)) > 1e-6, sum_ms


def test_slow_requests_are_measured_at_least_as_slow_as_the_upstream(lab):
    lab.instance("user-app", "V1")
    lab.sync()
    lab.policy(**SEED_RULES)
    gateway = lab.start_gateway()
    client_ms = timed_requests(gateway, "/user-app/hello" + SLOW_SUFFIX, 40)
    buckets, sum_ms = histogram(gateway, "V1", len(client_ms))
    below_upstream = max(edge for edge in LATENCY_EDGES_MS if edge < 1000 * SLOW_SECONDS)
    assert buckets[below_upstream] == 0, buckets
    assert buckets[bucket_top(max(client_ms))] == len(client_ms), (buckets, max(client_ms))
    assert 1000 * SLOW_SECONDS * len(client_ms) <= sum_ms < sum(client_ms), (sum_ms, client_ms)
