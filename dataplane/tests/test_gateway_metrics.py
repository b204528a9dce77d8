"""Metric windows in the contract's shape, Prometheus text with a latency histogram, and a
dashboard without the ingestion endpoint logged once."""

import json
import logging

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from dataplane.gateway.metrics import Metrics, p95
from dataplane.gateway.reporter import Reporter


def test_a_window_becomes_samples_per_service_and_version():
    metrics = Metrics()
    for n in range(1, 101):
        metrics.record("user-app", "V1", error=n % 50 == 0, latency_ms=float(n))
    metrics.record("user-app", "V2", error=True, latency_ms=3.0)
    samples = metrics.flush(now=1764478800.4)
    assert sorted(samples, key=lambda s: s["version"]) == [
        {"service": "user-app", "version": "V1", "ts": 1764478800, "window_s": 1,
         "total": 100, "errors": 2, "latency_ms_p95": 95.0},
        {"service": "user-app", "version": "V2", "ts": 1764478800, "window_s": 1,
         "total": 1, "errors": 1, "latency_ms_p95": 3.0},
    ]  # fmt: skip
    assert metrics.flush() == [], "a window is reported once"
    text = metrics.prometheus_text().decode()
    assert 'graylane_gateway_requests_total{lane="",service="user-app",version="V1"} 100.0' in text
    assert 'graylane_gateway_errors_total{lane="",service="user-app",version="V2"} 1.0' in text
    v1 = 'service="user-app",version="V1"'
    assert f'graylane_gateway_latency_seconds_bucket{{lane="",le="0.0905",{v1}}} 90.0' in text
    assert f'graylane_gateway_latency_seconds_count{{lane="",{v1}}} 100.0' in text
    assert f'graylane_gateway_latency_seconds_sum{{lane="",{v1}}} 5.05' in text


def test_a_sample_splits_its_requests_by_the_instance_that_answered():
    metrics = Metrics()
    for n in range(6):
        address = "10.0.0.1:7201" if n % 3 else "10.0.0.2:7201"
        metrics.record("user-app", "V1", error=n == 4, latency_ms=2.0, address=address)
    metrics.record("user-app", "V1", error=True, latency_ms=0.1)  # no instance could answer
    (sample,) = metrics.flush(now=1764478800.4)
    assert (sample["total"], sample["errors"]) == (7, 2)
    assert sample["instances"] == [
        {"address": "10.0.0.1:7201", "total": 4, "errors": 1},
        {"address": "10.0.0.2:7201", "total": 2, "errors": 0},
    ]


def test_the_latency_histogram_counts_every_request_once_across_windows():
    metrics = Metrics()
    for latency_ms in (0.05, 0.1, 0.3, 0.3, 31.0):
        metrics.record("user-app", "V2", error=False, latency_ms=latency_ms, lane="gray")
    metrics.flush()
    metrics.record("user-app", "V2", error=False, latency_ms=31.0, lane="gray")
    metrics.record("user-app", "V2", error=True, latency_ms=70_000.0, lane="gray")  # > last edge
    metrics.flush()
    [family] = [
        family
        for family in text_string_to_metric_families(metrics.prometheus_text().decode())
        if family.name == "graylane_gateway_latency_seconds"
    ]
    assert {s.labels["lane"] for s in family.samples} == {"gray"}
    buckets = {s.labels["le"]: s.value for s in family.samples if s.name.endswith("_bucket")}
    # Cumulative: each bucket holds the requests at or under its edge, in seconds.
    assert [buckets[le] for le in ("6.25e-05", "0.000125", "0.00025", "0.000354")] == [1, 2, 2, 4]
    assert [buckets[le] for le in ("0.0226", "0.032", "65.5", "+Inf")] == [4, 6, 6, 7]
    assert list(buckets.values()) == sorted(buckets.values())
    count, total = (
        next(s.value for s in family.samples if s.name.endswith(suffix))
        for suffix in ("_count", "_sum")
    )
    assert count == 7
    assert total == pytest.approx((0.05 + 0.1 + 0.3 + 0.3 + 31.0 + 31.0 + 70_000.0) / 1000)


def test_p95_is_the_nearest_rank():
    assert p95([5.0]) == 5.0
    assert p95([float(n) for n in range(1, 21)]) == 19.0


@pytest.mark.asyncio
async def test_a_missing_ingestion_endpoint_is_logged_once(caplog):
    posted = []

    def dashboard(request: httpx.Request) -> httpx.Response:
        posted.append(request)
        return httpx.Response(404, json={"detail": "Not found."})

    metrics = Metrics()
    async with httpx.AsyncClient(
        transport=httpx.MockTransport(dashboard), base_url="http://dashboard"
    ) as client:
        reporter = Reporter(client=client, metrics=metrics, name=lambda: "gw-1", interval=1)
        with caplog.at_level(logging.WARNING):
            for _ in range(5):
                metrics.record("user-app", "V1", error=False, latency_ms=1.0)
                await reporter.report()
    assert len(posted) == 5
    body = json.loads(posted[0].read())
    assert body["gateway"] == "gw-1"
    assert [(s["service"], s["version"], s["total"]) for s in body["samples"]] == [
        ("user-app", "V1", 1)
    ]
    assert [r.message for r in caplog.records].count(
        "Metric samples are dropped: the dashboard has no metrics endpoint (404)."
    ) == 1
    assert len(caplog.records) == 1
