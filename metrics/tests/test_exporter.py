"""/metrics: the dashboard's state for Prometheus, read at each scrape."""

import time

import pytest
from prometheus_client.parser import text_string_to_metric_families

from gateways import generation
from gateways.models import Gateway
from metrics import live, services
from metrics.samples import Sample
from policy.publishing import load_state
from registry_sync.models import Registry, Service

pytestmark = pytest.mark.django_db


def scrape(client, **headers) -> dict:
    response = client.get("/metrics", **headers)
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain; version=")
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.content.decode())
        for sample in family.samples
    }


def test_it_exports_revision_generation_lag_staleness_and_ingest(client, monkeypatch):
    monkeypatch.setattr(live, "_configured", live.MemoryWindows())
    load_state()
    Service.objects.create(name="user-app")
    first = generation.bump("test")
    current = generation.bump("test again")
    edge, _, _ = Gateway.objects.create_with_credentials(name="edge", acked_generation=first)
    Gateway.objects.create_with_credentials(name="core", acked_generation=current)
    Registry.objects.create(name="nacos", kind="nacos", stale=True)
    now = int(time.time())
    services.ingest(edge, [Sample("user-app", "V2", now, 60, 6, 20.0)])
    services.ingest(edge, [Sample("user-app", "V2", now, 60, 6, 20.0)])  # re-sent

    figures = scrape(client)
    assert figures[("graylane_policy_revision", ())] == 1
    assert figures[("graylane_generation", ())] == current
    assert figures[
        ("graylane_gateway_lag_generations", (("gateway", "edge"), ("mode", "pull")))
    ] == (current - first)
    assert (
        figures[("graylane_gateway_lag_generations", (("gateway", "core"), ("mode", "pull")))] == 0
    )
    assert figures[("graylane_registry_stale", (("registry", "nacos"),))] == 1
    assert figures[("graylane_metrics_samples_ingested_total", ())] == 1
    series = (("service", "user-app"), ("version", "V2"))
    assert figures[("graylane_service_requests_per_second", series)] == 1.0
    assert figures[("graylane_service_success_ratio", series)] == 0.9


def test_with_a_token_it_wants_that_bearer_token(client, settings):
    settings.METRICS_TOKEN = "scrape-secret"
    assert client.get("/metrics").status_code == 401
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 401
    assert client.get("/metrics", HTTP_AUTHORIZATION="Token scrape-secret").status_code == 401
    assert scrape(client, HTTP_AUTHORIZATION="Bearer scrape-secret")
