"""How configuration reaches a running gateway process and how it copes without it: the
long poll, acks, fail static (dashboard down, a restart from the cache file), a refused
document, and the metrics it reports."""

import json
import platform
import threading
import time

import httpx
import pytest
from django.db import connection
from django.utils import timezone

from gateways.models import Generation
from testing.gateway_lab import Lab, UpstreamFleet
from testing.processes import AsgiServer, database_url, django_env
from testing.waiting import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]
SEED_RULES = {"enabled": True, "routing": True, "header": {"name": "gray", "value": "gray-996"}}


@pytest.fixture
def fleet():
    with UpstreamFleet() as fleet:
        yield fleet


@pytest.fixture
def lab(server, fleet, make_user, make_gateway, tmp_path):
    lab = Lab(server, fleet, make_user, make_gateway, tmp_path)
    yield lab
    lab.stop()


def version_of(gateway, **headers) -> str:
    return httpx.get(gateway.url + "/user-app/hello", headers=headers, timeout=5).json()["version"]


class Traffic:
    """Requests sent one after another from a thread until stopped: every answer, in order,
    as (monotonic time, status, instance)."""

    def __init__(self, url: str):
        self.url = url
        self.answers: list[tuple[float, int, str | None]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        with httpx.Client(timeout=5) as client:
            while not self._stop.is_set():
                try:
                    response = client.get(self.url)
                    instance = response.json().get("instance") if response.is_success else None
                    self.answers.append((time.monotonic(), response.status_code, instance))
                except httpx.HTTPError as exc:
                    self.answers.append((time.monotonic(), 0, repr(exc)))

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc_info):
        self._stop.set()
        self._thread.join(10)


def test_a_policy_change_changes_routing_within_a_second_and_is_acked(lab):
    lab.instance("user-app", "V1")
    lab.instance("user-app", "V2")
    lab.sync()
    lab.policy(**SEED_RULES)
    gateway = lab.start_gateway()
    wait_until(lambda: lab.gateway_row("gw-test")["status"] == "in_sync", 5, "the first ack")
    assert version_of(gateway, gray="canary") == "V1"
    started = time.monotonic()
    lab.policy(header={"name": "gray", "value": "canary"})
    wait_until(lambda: version_of(gateway, gray="canary") == "V2", 1.0, "the new header rule")
    elapsed = time.monotonic() - started
    assert elapsed < 1.0
    row = wait_until(
        lambda: (row := lab.gateway_row("gw-test"))["status"] == "in_sync" and row, 2, "the ack"
    )
    assert row["acked_generation"] == row["desired_generation"] == gateway.generation()
    # Its acks say what runs it, as the agent's do: the gateways page shows them.
    assert (row["engine"], row["engine_version"]) == ("python", platform.python_version())


def test_an_instance_taken_offline_gets_no_more_traffic_within_a_second_and_nothing_fails(lab):
    leaving = lab.instance("user-app", "V1")
    staying = lab.instance("user-app", "V1")
    lab.sync()
    lab.policy(**SEED_RULES)
    gateway = lab.start_gateway()
    with Traffic(gateway.url + "/user-app/hello") as traffic:
        wait_until(lambda: len(traffic.answers) > 50, 5, "traffic")
        offline_at = time.monotonic()
        lab.offline(leaving)
        time.sleep(1.5)
    assert all(status == 200 for _, status, _ in traffic.answers), {
        status for _, status, _ in traffic.answers
    }
    late = [at - offline_at for at, _, instance in traffic.answers if instance == leaving.name]
    assert max(late) < 1.0, f"the offline instance answered {max(late):.2f} s after"
    after = [instance for at, _, instance in traffic.answers if at > offline_at + 1.0]
    assert after and set(after) == {staying.name}


def test_the_gateway_keeps_routing_with_the_dashboard_down_and_restarts_from_its_cache(
    fleet, make_user, make_gateway, tmp_path
):
    with AsgiServer(django_env(database_url(connection.settings_dict))) as dashboard:
        lab = Lab(dashboard, fleet, make_user, make_gateway, tmp_path)
        lab.instance("user-app", "V1")
        lab.instance("user-app", "V2")
        lab.sync()
        lab.policy(**SEED_RULES)
        gateway = lab.start_gateway()
        generation = gateway.generation()
    try:
        # The dashboard is gone.
        for _ in range(5):
            assert version_of(gateway, gray="gray-996") == "V2"
            assert version_of(gateway) == "V1"
        gateway.stop()
        assert json.loads((tmp_path / "gw-test.json").read_bytes())["generation"] == generation
        restarted = lab.start_gateway(port=gateway.port)
        assert restarted.generation() == generation
        assert version_of(restarted, gray="gray-996") == "V2"
        assert version_of(restarted) == "V1"
        assert "routing by the cached configuration" in restarted.log().lower()
    finally:
        lab.stop()


def test_an_unreadable_document_is_refused_with_an_error_ack_and_the_old_one_stays(lab):
    lab.instance("user-app", "V1")
    lab.instance("user-app", "V2")
    lab.sync()
    lab.policy(**SEED_RULES)
    gateway = lab.start_gateway("--poll-wait", "1")
    good = wait_until(lambda: lab.gateway_row("gw-test")["acked_generation"], 5, "the first ack")
    newest = Generation.objects.get(number=good)
    document = json.loads(newest.content)
    document["generation"] = good + 1
    document["gray"]["percent"] = 101  # no record to skip: the decision itself is unreadable
    Generation.objects.create(
        number=good + 1,
        revision=newest.revision,
        checksum="bad",
        content=json.dumps(document),
        reason="a broken document",
        created_at=timezone.now(),
    )
    row = wait_until(
        lambda: (row := lab.gateway_row("gw-test"))["last_error"] and row, 5, "the error ack"
    )
    assert "gray: " in row["last_error"] and "percent" in row["last_error"]
    assert row["acked_generation"] == good
    assert row["status"] == "failing"
    # Its next polls (answered 304 after 1 s) re-ack what it runs, never the refused one.
    time.sleep(2.5)
    row = lab.gateway_row("gw-test")
    assert (row["status"], row["acked_generation"]) == ("failing", good)
    assert gateway.generation() == good
    assert version_of(gateway) == "V1"
    assert version_of(gateway, gray="gray-996") == "V2"


def test_metrics_are_served_as_prometheus_text_and_a_missing_ingestion_is_logged_once(lab):
    lab.instance("user-app", "V1")
    lab.instance("user-app", "V2")
    lab.sync()
    lab.policy(**SEED_RULES)
    gateway = lab.start_gateway("--metrics-interval", "0.2")
    for _ in range(3):
        version_of(gateway)
    version_of(gateway, gray="gray-996")
    time.sleep(1.2)  # several report intervals
    version_of(gateway)
    time.sleep(0.5)
    text = httpx.get(gateway.url + "/-/metrics").text
    assert 'graylane_gateway_requests_total{lane="",service="user-app",version="V1"} 4.0' in text
    assert (
        'graylane_gateway_requests_total{lane="gray",service="user-app",version="V2"} 1.0' in text
    )
    assert 'graylane_gateway_errors_total{lane="",service="user-app",version="V1"} 0.0' in text
    assert httpx.get(gateway.url + "/metrics").text.startswith("# HELP")
    # Until the ingestion endpoint exists the dashboard answers 404: said once, not per report.
    dropped = [line for line in gateway.log(tail=100_000).splitlines() if "are dropped" in line]
    assert len(dropped) <= 1, dropped
