"""The series API read from a real Prometheus (`source=prometheus`) scraping our real gateway
process: the per-version totals and success rates the gateway served, to the request, the
same as the rollups of what it posted; and a clear 502 when a template is bad."""

import os
import time
from collections import Counter
from pathlib import Path

import httpx
import pytest

from testing.gateway_lab import FAIL_SUFFIX, SLOW_SECONDS, SLOW_SUFFIX
from testing.processes import PROMETHEUS, PrometheusProcess, free_port
from testing.waiting import wait_until

pytestmark = [
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        not os.access(PROMETHEUS, os.X_OK),
        reason=f"needs {PROMETHEUS} (Debian package prometheus; .ci/run installs it)",
    ),
]
GRAY = {"gray": "gray-996"}
SEED_RULES = {"enabled": True, "routing": True, "header": {"name": "gray", "value": "gray-996"}}
V1_IN_GROUP = (
    'label_replace(label_replace(vector(1), "version", "V1", "", ""), "g", "{group}", "", "")'
)
SCG_EXAMPLE = (
    Path(__file__).parents[1] / "docs" / "examples" / "prometheus-queries-spring-cloud-gateway.toml"
)


@pytest.fixture(scope="module")
def gateway_port():
    """Where this module's gateways listen, known before Prometheus starts scraping it."""
    return free_port()


@pytest.fixture(scope="module")
def prometheus(gateway_port, tmp_path_factory):
    directory = tmp_path_factory.mktemp("prometheus")
    with PrometheusProcess(directory, [f"127.0.0.1:{gateway_port}"], "/-/metrics") as process:
        yield process


@pytest.fixture
def viewer(api, settings, prometheus):
    settings.PROMETHEUS_URL = prometheus.url
    return api("viewer")


def totals(series: dict) -> dict[str, tuple[int, int]]:
    """{version: (requests, errors)} summed over a success-rate series' points."""
    return {
        version: (
            sum(total for _, _, total in points),
            round(sum(total * (100 - rate) / 100 for _, rate, total in points)),
        )
        for version, points in series.items()
    }


def test_the_series_through_prometheus_are_what_the_gateway_served(
    lab, prometheus, viewer, gateway_port
):
    lab.instance("user-app", "V1")
    lab.instance("user-app", "V2")
    lab.sync()
    lab.policy(**SEED_RULES)
    gateway = lab.start_gateway(port=gateway_port)
    since = int(time.time())
    served: Counter = Counter()
    failed: Counter = Counter()
    slowest_ms: Counter = Counter()
    # V1 answers in a fraction of a millisecond, V2's successes take SLOW_SECONDS.
    for headers, requests, failing, suffix in (({}, 30, 3, ""), (GRAY, 20, 5, SLOW_SUFFIX)):
        for n in range(requests):
            path = "/user-app/hello" + (FAIL_SUFFIX if n < failing else suffix)
            started = time.perf_counter()
            response = httpx.get(gateway.url + path, headers=headers, timeout=5)
            version = response.json()["version"]
            slowest_ms[version] = max(slowest_ms[version], 1000 * (time.perf_counter() - started))
            served[version] += 1
            failed[version] += response.status_code >= 500
    expected = {version: (served[version], failed[version]) for version in served}
    assert expected == {"V1": (30, 3), "V2": (20, 5)}

    query = f"?service=user-app&since={since}&step=60"

    def through_prometheus():
        response = viewer.get(f"/api/v1/metrics/success-rate/{query}&source=prometheus")
        assert response.status_code == 200, response.content
        return response.json() if totals(response.json()["series"]) == expected else None

    answer = wait_until(through_prometheus, 20, "Prometheus to scrape the final counts")
    assert answer["service"] == "user-app"
    for points in answer["series"].values():
        assert all(ts % 60 == 0 and ts >= since // 60 * 60 for ts, _, _ in points)
        assert all(isinstance(total, int) for _, _, total in points)
    # The same numbers as the rollups of what the gateway posted to the dashboard.
    wait_until(
        lambda: (
            totals(viewer.get(f"/api/v1/metrics/success-rate/{query}").json()["series"]) == expected
        ),
        10,
        "the rollups of the gateway's reports",
    )

    latency = viewer.get(f"/api/v1/metrics/latency/{query}&source=prometheus")
    assert latency.status_code == 200, latency.content
    series = latency.json()["series"]
    assert {v: sum(total for _, _, total in points) for v, points in series.items()} == {
        "V1": 30,
        "V2": 20,
    }
    # The worst of the gateway's per-second p95s in the step: above zero, below what the
    # client saw, and for V2 at least its upstream's delay. A step whose scrapes all came
    # before the gateway's first window closed has none (null).
    known = {v: [p95 for _, p95, _ in points if p95 is not None] for v, points in series.items()}
    assert all(known.values()), series
    assert all(0 < p95 < slowest_ms["V1"] for p95 in known["V1"]), (series, slowest_ms)
    assert 1000 * SLOW_SECONDS <= max(known["V2"]) < slowest_ms["V2"], (series, slowest_ms)


def write(tmp_path, text: str) -> str:
    path = tmp_path / "queries.toml"
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize(
    "template,message",
    [
        ("sum by (version) (rate(nothing[{step}])", "refused the requests template (bad_data)"),
        ("vector(1)", "without a `version` label"),
        (f"{V1_IN_GROUP.format(group='a')} or {V1_IN_GROUP.format(group='b')}", "several series"),
    ],
)
def test_a_bad_template_is_a_502_saying_what_is_wrong(
    viewer, settings, tmp_path, template, message
):
    settings.PROMETHEUS_QUERIES = write(
        tmp_path, f"[services.broken-app]\nrequests = '{template}'\n"
    )
    since = int(time.time()) - 120
    response = viewer.get(
        f"/api/v1/metrics/success-rate/?service=broken-app&since={since}&source=prometheus"
    )
    assert response.status_code == 502, response.content
    assert message in response.json()["detail"]
    # Other services keep the default templates, and the rollups still answer.
    fine = viewer.get("/api/v1/metrics/success-rate/?service=user-app&source=prometheus")
    assert fine.status_code == 200, fine.content
    assert viewer.get("/api/v1/metrics/success-rate/?service=broken-app").status_code == 200


def test_the_spring_cloud_gateway_example_templates_are_valid_promql(viewer, settings):
    settings.PROMETHEUS_QUERIES = str(SCG_EXAMPLE)
    for service in ("user-app", "order-app"):  # the fleet-wide templates and an override
        for path in ("success-rate", "latency"):
            response = viewer.get(f"/api/v1/metrics/{path}/?service={service}&source=prometheus")
            assert response.status_code == 200, response.content
            assert response.json() == {"service": service, "series": {}}
