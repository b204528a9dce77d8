"""The series API read from a real Prometheus (`source=prometheus`) scraping our real gateway
process: the per-version totals and success rates the gateway served, to the request, the
same as the rollups of what it posted, and the p95 of those requests, sub-millisecond or
slow; and a clear 502 when a template is bad."""

import math
import os
import time
from collections import Counter, defaultdict
from pathlib import Path

import httpx
import pytest

from dataplane.gateway.metrics import p95
from testing.gateway_lab import FAIL_SUFFIX, SLOW_SECONDS, SLOW_SUFFIX
from testing.processes import PROMETHEUS, PrometheusProcess, free_port
from testing.waiting import wait_until
from tests.test_gateway_latency import bucket_top, histogram

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


def p95_bucket(buckets: dict[float, float], requests: int) -> tuple[float, float]:
    """The lower and upper edges (ms) of the histogram bucket that holds the nearest-rank
    p95 of `requests`, from the gateway's cumulative {upper edge: requests at or under}."""
    edges = sorted(buckets)
    upper = next(edge for edge in edges if buckets[edge] >= math.ceil(0.95 * requests))
    lower = max((edge for edge in edges if edge < upper), default=0.0)
    return lower, upper


def test_the_series_through_prometheus_are_what_the_gateway_served(
    lab, prometheus, viewer, gateway_port
):
    lab.instance("user-app", "V1")
    lab.instance("user-app", "V2")
    lab.sync()
    lab.policy(**SEED_RULES)
    gateway = lab.start_gateway(port=gateway_port)
    # The traffic is sent early in a minute, so that one 60 s step holds all of it and its
    # p95 is that of every request: a request counts in the step in which Prometheus first
    # scraped it, a second or two after it was answered.
    if (left := 60 - time.time() % 60) < 20:
        time.sleep(left)
    since = int(time.time())
    served: Counter = Counter()
    failed: Counter = Counter()
    client_ms: defaultdict[str, list[float]] = defaultdict(list)
    # V1 answers in a fraction of a millisecond, V2's successes take SLOW_SECONDS.
    with httpx.Client(base_url=gateway.url, timeout=5) as client:
        for headers, requests, failing, suffix in (({}, 30, 3, ""), (GRAY, 20, 5, SLOW_SUFFIX)):
            for n in range(requests):
                path = "/user-app/hello" + (FAIL_SUFFIX if n < failing else suffix)
                started = time.perf_counter()
                response = client.get(path, headers=headers)
                elapsed_ms = 1000 * (time.perf_counter() - started)
                version = response.json()["version"]
                client_ms[version].append(elapsed_ms)
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
    # One step, with every request of each version.
    assert {v: [total for _, _, total in points] for v, points in series.items()} == {
        "V1": [30],
        "V2": [20],
    }, series
    read = {version: points[0][1] for version, points in series.items()}
    served_p95 = {  # the bucket of the p95 of the requests as the gateway timed them
        version: p95_bucket(histogram(gateway, version, served[version])[0], served[version])
        for version in served
    }
    client_p95 = {version: p95(latencies) for version, latencies in client_ms.items()}
    figures = {"read": read, "served p95 in": served_p95, "client p95": client_p95}
    print(f"p95 (ms): {figures}")
    for version in ("V1", "V2"):
        # histogram_quantile interpolates within that bucket: the figure is what the gateway
        # served, to a bucket, however loaded the machine (a slow moment weighs as many
        # requests as it held, no more).
        lower, upper = served_p95[version]
        assert lower < read[version] <= upper + 1e-9, figures  # (at its top: float rounding)
        # Each request took the gateway less time than the client that sent it, so that
        # bucket is at most the one of the client's p95.
        assert upper <= bucket_top(client_p95[version]), figures
    # 15 of V2's 20 requests waited SLOW_SECONDS upstream, so its p95 did too. At most the 5
    # fast failures lie below the bucket from 22.6 to 32 ms, so the interpolated p95 is at
    # least 22.6 + 9.4 * 14/15 = 31.4 ms.
    assert read["V2"] >= 1000 * SLOW_SECONDS, figures


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
