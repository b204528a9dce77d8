"""Metric windows in the contract's shape, Prometheus text, and a dashboard without the
ingestion endpoint logged once."""

import json
import logging

import httpx
import pytest

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
    assert 'graylane_gateway_latency_p95_ms{lane="",service="user-app",version="V1"} 95.0' in text


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
