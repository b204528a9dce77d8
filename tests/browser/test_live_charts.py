"""Issue 12: an operator watches a release on the service page. Traffic with errors for V2,
sent by a gateway through the real ingestion API, pulls V2's success-rate line below V1's
without a reload (over /ws/live/, from the beat job inside the real ASGI server), and a
revision published meanwhile appears as a marker on the time axis. The figures are read
from what the chart plots (its data attributes), not from a screenshot."""

import json
import re
import threading
import time

import httpx
import pytest

from accounts.models import ApiToken
from gateways.models import Gateway
from registry_sync.models import Service
from testing.gateway_lab import FAIL_SUFFIX, Lab, UpstreamFleet

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # a uvicorn of its own (asgi_server)


@pytest.fixture
def server_url(asgi_server):
    return asgi_server.url


class Traffic:
    """A gateway posting one sample per version every half second, for the second before,
    with the error counts the test sets (`errors[version]` of 100 requests). It keeps up
    with the gateway document (polls and acks it, as real gateways do): a gateway may
    report only services of the document it runs, and counts in release analysis only
    while in sync."""

    def __init__(self, url: str, name: str, token: str):
        self.client = httpx.Client(base_url=url, headers={"Authorization": f"Token {token}"})
        self.name = name
        self.errors = {"V1": 0, "V2": 0}
        self.stop = threading.Event()
        self.failures: list[str] = []
        self.thread = threading.Thread(target=self._run, daemon=True)

    def send(self, ts: int) -> None:
        samples = [
            {
                "service": "user-app",
                "version": v,
                "ts": ts,
                "window_s": 1,
                "total": 100,
                "errors": e,
                "latency_ms_p95": 12.0 if v == "V1" else 30.0,
            }
            for v, e in self.errors.items()
        ]
        answer = self.client.post(
            "/api/v1/metrics/", json={"gateway": self.name, "samples": samples}
        )
        if answer.status_code != 202:
            self.failures.append(f"{answer.status_code} {answer.text[:200]}")

    def follow(self) -> None:
        document = self.client.get("/api/v1/gateway-config/")
        if document.status_code != 200:
            self.failures.append(f"poll: {document.status_code} {document.text[:200]}")
            return
        answer = self.client.post(
            f"/api/v1/gateways/{self.name}/ack/", json={"generation": document.json()["generation"]}
        )
        if answer.status_code != 200:
            self.failures.append(f"ack: {answer.status_code} {answer.text[:200]}")

    def _run(self) -> None:
        while not self.stop.wait(0.5):
            self.follow()
            self.send(int(time.time()) - 1)

    def __enter__(self):
        self.follow()
        self.thread.start()
        return self

    def __exit__(self, *exc_info):
        self.stop.set()
        self.thread.join(5)
        self.client.close()


class GatewayTraffic:
    """Real requests through a real gateway process, a few every 50 ms: plain ones (PROD:
    V1) and ones with the gray header (GRAY: V2), `gray_failing` of every 10 gray ones to
    a path the instance answers with 500."""

    def __init__(self, gateway_url: str):
        self.client = httpx.Client(base_url=gateway_url, timeout=5)
        self.gray_failing = 0
        self.answers: list[tuple[str, int]] = []  # (version, status)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        n = 0
        while not self.stop.wait(0.05):
            n += 1
            failing = n % 10 < self.gray_failing
            for headers, path in (
                ({}, "/user-app/hello"),
                ({"gray": "gray-996"}, "/user-app/hello" + (FAIL_SUFFIX if failing else "")),
            ):
                answer = self.client.get(path, headers=headers)
                self.answers.append((answer.json()["version"], answer.status_code))

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc_info):
        self.stop.set()
        self.thread.join(5)
        self.client.close()


def last_points(page) -> dict:
    return json.loads(page.locator("#chart-success").get_attribute("data-last") or "{}")


def test_v2_errors_pull_its_line_below_v1_live_and_a_revision_is_marked(
    page, asgi_server, make_role_user, log_in, screenshot
):
    Service.objects.create(name="user-app")
    make_role_user("vera", "viewer")
    operator = make_role_user("olga", "operator")
    _, operator_key = ApiToken.objects.issue(operator)
    _, gateway_token, _ = Gateway.objects.create_with_credentials(name="edge", mode=Gateway.PULL)
    with Traffic(asgi_server.url, "edge", gateway_token) as traffic:
        now = int(time.time())
        for ts in range(now - 20, now):  # healthy history for both versions
            traffic.send(ts)
        log_in("vera")
        page.goto("/services/user-app/")
        page.evaluate("window.notReloaded = true")
        page.wait_for_function(
            "() => { const l = JSON.parse(document.getElementById('chart-success').dataset.last"
            " || '{}'); return l.V1 && l.V2 && l.V1.value === 100 && l.V2.value === 100; }"
        )
        assert (
            page.locator('#version-status [data-version="V2"]').get_attribute("data-state") == "ok"
        )

        traffic.errors["V2"] = 40
        page.wait_for_function(
            "() => { const l = JSON.parse(document.getElementById('chart-success').dataset.last"
            " || '{}'); return l.V2 && l.V1 && l.V2.value < 80 && l.V1.value === 100; }",
            timeout=15_000,
        )
        points = last_points(page)
        assert points["V2"]["value"] < points["V1"]["value"]
        assert points["V2"]["ts"] >= now, "the lowered point is a live one, not history"

        answer = httpx.patch(
            asgi_server.url + "/api/v1/policy/",
            json={"percent": 7},
            headers={"Authorization": f"Token {operator_key}"},
        )
        assert answer.status_code == 200, answer.text
        revision = answer.json()["revision"]
        page.wait_for_function(
            f"() => (document.getElementById('traffic').dataset.markers || '').includes("
            f"'revision {revision}')",
            timeout=10_000,
        )
        markers = json.loads(page.locator("#traffic").get_attribute("data-markers"))
        label = next(m["label"] for m in markers if m["label"].startswith(f"revision {revision}"))
        assert "percent: 0 → 7" in label, label
        assert page.evaluate("window.notReloaded") is True
        screenshot("service-traffic-live")
    assert not traffic.failures, traffic.failures


def test_the_overview_shows_each_versions_live_success_and_the_gray_delta(
    page, asgi_server, make_role_user, log_in
):
    Service.objects.create(name="user-app")
    make_role_user("vera", "viewer")
    _, gateway_token, _ = Gateway.objects.create_with_credentials(name="edge", mode=Gateway.PULL)
    with Traffic(asgi_server.url, "edge", gateway_token) as traffic:
        traffic.errors["V2"] = 10
        log_in("vera")
        page.goto("/")
        row = page.locator('#service-table tr[data-service="user-app"]')
        # The page shows the minute as it was; the sparklines come with the live updates.
        row.locator('.version-health[data-version="V2"] svg.sparkline').wait_for(timeout=10_000)
        delta = row.locator(".overview-delta")
        assert float(delta.get_attribute("data-delta")) == pytest.approx(-10.0)
        assert "worse" in delta.get_attribute("class")
        # A line per version: its minute's rate and request count (around its sparkline).
        line = row.locator('.version-health[data-version="V2"]').inner_text()
        assert re.fullmatch(r"V2\s+90 %, \d+ requests", line.strip()), line
    assert not traffic.failures, traffic.failures


def test_real_v2_errors_through_the_gateway_pull_its_line_below_v1_live(
    page, asgi_server, make_user, make_gateway, make_role_user, log_in, tmp_path
):
    """The whole path a user sees: requests through the gateway process, its per-second
    reports to the ingestion API, the live windows, the beat's metrics messages over
    /ws/live/, and the chart's lines."""
    with UpstreamFleet() as fleet:
        lab = Lab(asgi_server, fleet, make_user, make_gateway, tmp_path)
        try:
            lab.instance("user-app", "V1")
            lab.instance("user-app", "V2")
            lab.sync()
            lab.policy(enabled=True, routing=True, header={"name": "gray", "value": "gray-996"})
            gateway = lab.start_gateway()
            make_role_user("vera", "viewer")
            with GatewayTraffic(gateway.url) as traffic:
                log_in("vera")
                page.goto("/services/user-app/")
                page.evaluate("window.notReloaded = true")
                page.wait_for_function(
                    "() => { const l = JSON.parse(document.getElementById('chart-success')"
                    ".dataset.last || '{}'); return l.V1 && l.V2 && l.V1.value === 100"
                    " && l.V2.value === 100; }",
                    timeout=20_000,
                )
                traffic.gray_failing = 5  # half of V2's requests answer 500 from now on
                page.wait_for_function(
                    "() => { const l = JSON.parse(document.getElementById('chart-success')"
                    ".dataset.last || '{}'); return l.V1 && l.V2 && l.V2.value < 80"
                    " && l.V1.value === 100; }",
                    timeout=20_000,
                )
                assert page.evaluate("window.notReloaded") is True
            served = {version for version, _ in traffic.answers}
            assert served == {"V1", "V2"}
            assert all(status == 200 for version, status in traffic.answers if version == "V1")
            assert any(status == 500 for version, status in traffic.answers if version == "V2")
        finally:
            lab.stop()
