"""The Prometheus source's configuration and its failures that need no Prometheus: templates
checked when loaded, `source` validated, and an unreachable or silent Prometheus answered
with 503 and a message. The queries against a real Prometheus: tests/test_prometheus_source.py."""

import math
import socket
import time
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from dataplane.gateway.metrics import LATENCY_EDGES_MS
from metrics import latency, promql_source
from metrics.tests.conftest import post, sample
from testing.processes import free_port

pytestmark = pytest.mark.django_db
SCG_EXAMPLE = (
    Path(__file__).parents[2] / "docs" / "examples" / "prometheus-queries-spring-cloud-gateway.toml"
)


def write(tmp_path, text: str) -> str:
    path = tmp_path / "queries.toml"
    path.write_text(text)
    return str(path)


def test_placeholders_are_filled_and_the_service_escaped_for_a_promql_string():
    rendered = promql_source.render('x{service="{service}"}[{step}]', 'a"b\\c', 300)
    assert rendered == 'x{service="a\\"b\\\\c"}[300s]'


def test_a_file_overrides_fleet_wide_and_per_service_and_the_rest_stays_default(tmp_path):
    templates = promql_source.load_templates(
        write(tmp_path, "errors = 'e{step}'\n[services.legacy]\nrequests = 'r{service}'\n")
    )
    assert templates.for_service("user-app") == {
        **promql_source.DEFAULT_TEMPLATES,
        "errors": "e{step}",
    }
    assert templates.for_service("legacy")["requests"] == "r{service}"
    assert templates.for_service("legacy")["errors"] == "e{step}"


def test_the_gateway_histogram_read_by_default_has_every_second_edge_of_the_dashboards():
    template = promql_source.DEFAULT_TEMPLATES[promql_source.LATENCY]
    assert "graylane_gateway_latency_seconds_bucket" in template
    buckets = [round(latency.STEPS_PER_DOUBLING * math.log2(edge)) for edge in LATENCY_EDGES_MS]
    assert buckets == list(range(-16, latency.LAST_BUCKET, 2))
    for bucket, edge in zip(buckets, LATENCY_EDGES_MS, strict=True):
        assert edge == pytest.approx(latency.upper_edge(bucket), rel=0.005)


def test_the_spring_cloud_gateway_example_loads():
    templates = promql_source.load_templates(str(SCG_EXAMPLE))
    assert "spring_cloud_gateway_requests_seconds_count" in templates.for_service("x")["requests"]
    assert 'outcome="SERVER_ERROR"' in templates.for_service("order-app")["errors"]


@pytest.mark.parametrize(
    "text,message",
    [
        ("requests = 'x{version}'", "unknown placeholder {version}"),
        ("erors = 'x'", "unknown template erors"),
        ("requests = ''", "expected a PromQL string"),
        ("[services.a]\nlatency = 'x'", "services.a: unknown template latency"),
        ("requests = 'unclosed", "PROMETHEUS_QUERIES="),
    ],
)
def test_a_bad_file_is_refused_naming_what_is_wrong(tmp_path, text, message):
    with pytest.raises(ImproperlyConfigured, match=message.replace("{", r"\{").replace(".", r"\.")):
        promql_source.load_templates(write(tmp_path, text))


def test_source_prometheus_without_a_prometheus_is_400_on_source(api, settings):
    settings.PROMETHEUS_URL = ""
    response = api("viewer").get("/api/v1/metrics/success-rate/?service=user-app&source=prometheus")
    assert response.status_code == 400 and "source" in response.json()
    bad = api("viewer", "v2").get("/api/v1/metrics/latency/?service=user-app&source=graphite")
    assert bad.status_code == 400 and "source" in bad.json()


@pytest.mark.parametrize("path", ["success-rate", "latency"])
def test_an_unreachable_prometheus_is_503_and_the_rollups_still_answer(
    windows, gateway, api, settings, path
):
    name, client = gateway
    start = int(time.time()) // 60 * 60 - 60
    assert post(client, name, sample(start + 1, total=10, errors=1)).status_code == 202
    settings.PROMETHEUS_URL = f"http://127.0.0.1:{free_port()}"  # nothing listens
    viewer = api("viewer")
    query = f"/api/v1/metrics/{path}/?service=user-app&since={start}"
    response = viewer.get(query + "&source=prometheus")
    assert response.status_code == 503
    assert "cannot be reached" in response.json()["detail"]
    assert settings.PROMETHEUS_URL in response.json()["detail"]
    rollups = viewer.get(query)
    assert rollups.status_code == 200 and rollups.json()["series"]["V1"][0][2] == 10


def test_a_prometheus_that_does_not_answer_is_503_after_the_timeout(api, settings):
    with socket.socket() as silent:  # accepts connections (the backlog), never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        settings.PROMETHEUS_URL = f"http://127.0.0.1:{silent.getsockname()[1]}"
        settings.PROMETHEUS_TIMEOUT = 0.3
        started = time.monotonic()
        response = api("viewer").get(
            "/api/v1/metrics/success-rate/?service=user-app&source=prometheus"
        )
    assert response.status_code == 503
    assert "did not answer within 0.3 s" in response.json()["detail"]
    assert time.monotonic() - started < 3


def test_the_deployment_may_read_from_prometheus_by_default(api, settings):
    settings.METRICS_SOURCE = "prometheus"
    settings.PROMETHEUS_URL = f"http://127.0.0.1:{free_port()}"
    response = api("viewer").get("/api/v1/metrics/success-rate/?service=user-app")
    assert response.status_code == 503  # it went to Prometheus
    assert (
        api("viewer", "v2")
        .get("/api/v1/metrics/success-rate/?service=user-app&source=rollups")
        .status_code
        == 200
    )


def test_a_prometheus_at_a_refused_address_is_never_asked(api, settings):
    # Start-up refuses such a PROMETHEUS_URL (tests/test_deploy_settings.py); the check at
    # connect time holds for any that gets past it (a name resolving there later).
    settings.PROMETHEUS_URL = "http://169.254.169.254:9090"
    started = time.monotonic()
    response = api("viewer").get("/api/v1/metrics/success-rate/?service=user-app&source=prometheus")
    assert time.monotonic() - started < 1
    assert response.status_code == 503
    assert "169.254.169.254 is a cloud metadata address: refused" in response.json()["detail"]
