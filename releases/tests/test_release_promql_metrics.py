"""Custom metrics judged through a real Prometheus (Debian's /usr/bin/prometheus, as
tests/test_prometheus_source.py runs it) scraping an exporter of the fleet's own metrics:
the template is filled in for the gray version, a value past its bound fails the interval
and the event names the metric."""

import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from releases.tests.conftest import INTERVAL, LAG, kinds, tick, traffic
from releases.tests.test_release_metrics import by_name, running
from testing.processes import PROMETHEUS, PrometheusProcess
from testing.waiting import wait_until

pytestmark = [
    pytest.mark.slow,
    pytest.mark.django_db,
    pytest.mark.skipif(
        not os.access(PROMETHEUS, os.X_OK),
        reason=f"needs {PROMETHEUS} (Debian package prometheus; .ci/run installs it)",
    ),
]

# What the services export: gray (V2) is slow at the 99th percentile, prod is not; both
# succeed as often.
EXPOSITION = b"""# TYPE app_p99_seconds gauge
app_p99_seconds{service="user-app",version="V2",lane="gray"} 0.9
app_p99_seconds{service="user-app",version="V1",lane=""} 0.1
app_p99_seconds{service="order-app",version="V2",lane="gray"} 0.05
# TYPE app_success_ratio gauge
app_success_ratio{service="user-app",version="V2"} 0.999
app_success_ratio{service="user-app",version="V1"} 0.5
"""

METRICS = [
    {
        "name": "p99",
        "query": 'max(app_p99_seconds{service="{service}",version="{version}",lane="{lane}"})',
        "bound": 0.5,
        "fail_when": "above",
    },
    {
        "name": "success",
        "query": 'min(min_over_time(app_success_ratio{service="{service}",'
        'version="{version}"}[{interval}]))',
        "bound": 0.99,
        "fail_when": "below",
    },
]


class Exporter(BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.end_headers()
        self.wfile.write(EXPOSITION)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory):
    server = ThreadingHTTPServer(("127.0.0.1", 0), Exporter)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    directory = tmp_path_factory.mktemp("prometheus")
    target = f"127.0.0.1:{server.server_address[1]}"
    try:
        with PrometheusProcess(directory, [target]) as process:

            def has_series():
                answer = httpx.get(
                    f"{process.url}/api/v1/query", params={"query": "app_p99_seconds"}
                )
                return bool(answer.json()["data"]["result"])

            wait_until(has_series, 20, "Prometheus to scrape the exporter")
            # The analysis reads a window's end, a few seconds back: let that hold samples.
            time.sleep(INTERVAL)
            yield process
    finally:
        server.shutdown()


def test_a_promql_metric_past_its_bound_fails_intervals_into_a_rollback(
    api, fleet, windows, record, settings, prometheus
):
    settings.PROMETHEUS_URL = prometheus.url
    # Each window is judged as soon as the beat job may: its end a lag back from now.
    release = running(api, metrics=METRICS, ago=INTERVAL + LAG)
    for interval in range(2):
        if interval:
            time.sleep(INTERVAL)
        traffic(record, release, interval)  # errors as prod's
        current = tick(release, interval + 1)
        detail = current.events.filter(kind="analysis").first().detail
        figures = by_name(detail)
        assert (figures["p99"]["verdict"], figures["p99"]["figure"]) == ("fail", 0.9)
        assert (figures["success"]["verdict"], figures["success"]["figure"]) == ("pass", 0.999)
        assert figures["errors"]["verdict"] in ("pass", "inconclusive")
        assert detail["failed_metrics"] == ["p99"]
        assert detail["reason"] == "p99 0.9 above 0.5"
    assert current.state == "rolled_back" and "advanced" not in kinds(current)


def test_a_promql_metric_within_its_bound_lets_the_step_advance(
    api, fleet, windows, record, settings, prometheus
):
    settings.PROMETHEUS_URL = prometheus.url
    loose = [{**METRICS[0], "bound": 1.0}, METRICS[1]]
    release = running(api, metrics=loose, ago=INTERVAL + LAG)
    traffic(record, release, 0)
    current = tick(release, 1)
    detail = current.events.filter(kind="analysis").first().detail
    assert [(m["name"], m["verdict"]) for m in detail["metrics"]] == [
        ("errors", "pass"),
        ("p99", "pass"),
        ("success", "pass"),
    ]
    assert (current.state, current.step) == ("running", 1)


def test_a_query_without_one_value_holds_the_step_and_says_why(
    api, fleet, windows, record, settings, prometheus
):
    settings.PROMETHEUS_URL = prometheus.url
    unread = [
        # Both versions' series: not one value.
        {**METRICS[0], "name": "both", "query": 'app_p99_seconds{service="{service}"}'},
        # No series of this version.
        {**METRICS[1], "name": "none", "query": 'app_success_ratio{version="{version}-x"}'},
    ]
    release = running(api, metrics=unread, ago=INTERVAL + LAG)
    traffic(record, release, 0)
    current = tick(release, 1)
    detail = current.events.filter(kind="analysis").first().detail
    figures = by_name(detail)
    assert figures["both"]["verdict"] == "error"
    assert "answers 2 series, not one: aggregate them" in figures["both"]["reason"]
    assert figures["none"] == {
        "name": "none",
        "verdict": "insufficient",
        "figure": None,
        "bound": 0.99,
        "reason": "none: no value for the gray version",
    }
    assert detail["verdict"] == "inconclusive" and "failed_metrics" not in detail
    assert "waiting for none: no value for the gray version" in detail["reason"]
    assert (current.state, current.step, current.failures) == ("running", 0, 0)
