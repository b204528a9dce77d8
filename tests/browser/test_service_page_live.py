"""Issue 26, the service page live: the 5-minute headline follows the live figures the chart
plots (it showed its last live figures for 20 s after they stopped, then a sum of the chart's
overlapping points); each instance's traffic, as the real gateway reports it by the instance
that answered; the lifecycle timeline gains an instance's steps as the instance reports them.
All without a reload."""

import re
import threading
import time
from datetime import UTC, datetime

import httpx
import pytest
from playwright.sync_api import expect

from accounts.models import ApiToken
from gateways.models import Gateway
from registry_sync.models import Instance, Service
from testing.gateway_lab import Lab, UpstreamFleet
from tests.browser.test_live_charts import Traffic

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # a uvicorn of its own (asgi_server)


@pytest.fixture
def server_url(asgi_server):
    return asgi_server.url


def test_the_lifecycle_timeline_gains_a_step_without_a_reload(
    page, asgi_server, make_role_user, log_in
):
    Service.objects.create(name="user-app")
    _, fleet_key = ApiToken.objects.issue(make_role_user("fleet", "service"))
    make_role_user("vera", "viewer")
    log_in("vera")
    page.goto("/services/user-app/")
    page.evaluate("window.notReloaded = true")
    timeline = page.locator("#lifecycle")
    expect(timeline).to_contain_text("No lifecycle events reported.")

    def report(event: str) -> None:
        answer = httpx.post(
            asgi_server.url + "/api/v1/lifecycle/",
            json={
                "service": "user-app",
                "host": "10.0.0.5",
                "port": 7201,
                "event": event,
                "at": datetime.now(UTC).isoformat(),
            },
            headers={"Authorization": f"Token {fleet_key}"},
        )
        assert answer.status_code == 202, answer.text

    report("starting")
    row = timeline.locator("tbody tr", has_text="10.0.0.5:7201")
    expect(row.locator(".step-label")).to_have_text(["starting"])
    report("serving")
    expect(row.locator(".step-label")).to_have_text(["starting", "serving"])
    expect(row).to_contain_text("(running)")
    assert page.evaluate("window.notReloaded") is True


class CountedTraffic(Traffic):
    """Traffic that remembers the seconds the server took (a second re-sent is a duplicate)."""

    def __init__(self, *args):
        super().__init__(*args)
        self.taken: set[int] = set()

    def send(self, ts: int) -> None:
        failures = len(self.failures)
        super().send(ts)
        if len(self.failures) == failures:
            self.taken.add(ts)


# The chart's newest V2 point and the headline's V2 line, read in one go (one frame).
READ_BOTH = """() => {
  const last = JSON.parse(document.getElementById('chart-success').dataset.last || '{}').V2;
  const line = document.querySelector('#version-status [data-version="V2"]');
  return {chart: last ? last.value : null, now: line ? line.dataset.now : null,
          text: line ? line.textContent : ''};
}"""


def test_the_headline_follows_the_live_figures_the_chart_plots(
    page, asgi_server, make_role_user, log_in
):
    Service.objects.create(name="user-app")
    make_role_user("vera", "viewer")
    _, token, _ = Gateway.objects.create_with_credentials(name="edge", mode=Gateway.PULL)
    with CountedTraffic(asgi_server.url, "edge", token) as traffic:
        log_in("vera")
        page.goto("/services/user-app/")
        page.evaluate("window.notReloaded = true")
        page.wait_for_function(f"() => ({READ_BOTH})().now === '100'", timeout=15_000)

        traffic.errors["V2"] = 50
        page.wait_for_function(f"() => ({READ_BOTH})().chart < 100", timeout=15_000)
        for _ in range(5):
            both = page.evaluate(READ_BOTH)
            assert float(both["now"]) == pytest.approx(both["chart"], abs=0.005), both
            time.sleep(0.7)
        assert float(page.evaluate(READ_BOTH)["now"]) < 80
        traffic.stop.set()
    assert not traffic.failures, traffic.failures
    sent = 100 * len(traffic.taken)
    # Quiet for longer than the 10 s window and the 10 s a message stays fresh: the
    # headline still counts the 5 minutes as the server does, with nothing "now".
    time.sleep(22)
    both = page.evaluate(READ_BOTH)
    assert both["now"] == "", both
    assert both["text"].endswith(f" of {sent} requests in 5 min"), (both, sent)
    assert page.evaluate("window.notReloaded") is True


def test_each_instance_shows_its_traffic_as_the_gateway_reports_it(
    page, asgi_server, make_user, make_gateway, make_role_user, log_in, tmp_path
):
    with UpstreamFleet() as fleet:
        lab = Lab(asgi_server, fleet, make_user, make_gateway, tmp_path)
        stop = threading.Event()
        try:
            first, second = lab.instance("user-app", "V1"), lab.instance("user-app", "V1")
            lab.instance("user-app", "V2")  # the gray version: no request goes there
            lab.sync()
            # Version-aware, gray by a header: requests without it go to prod (V1) only.
            lab.policy(enabled=True, routing=True, header={"name": "gray", "value": "gray-996"})
            gateway = lab.start_gateway()
            make_role_user("vera", "viewer")
            log_in("vera")
            page.goto("/services/user-app/")
            page.evaluate("window.notReloaded = true")

            def send() -> None:
                with httpx.Client(base_url=gateway.url, timeout=5) as client:
                    while not stop.wait(0.02):
                        client.get("/user-app/hello")

            threading.Thread(target=send, daemon=True).start()
            for upstream in (first, second):
                pk = Instance.objects.get(port=upstream.port).pk
                cell = page.locator(f'tr[data-instance-id="{pk}"] [data-field="traffic"]')
                expect(cell).to_have_text(re.compile(r"^\d+(\.\d+)?/s · "), timeout=20_000)
            v2 = Instance.objects.get(version="V2").pk
            expect(
                page.locator(f'tr[data-instance-id="{v2}"] [data-field="traffic"]')
            ).to_have_text("—")
            assert page.evaluate("window.notReloaded") is True
        finally:
            stop.set()
            lab.stop()
