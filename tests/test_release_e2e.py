"""Releases end to end with real processes: a dashboard (uvicorn) whose beat runs the
analysis, the Python gateway routing real requests and reporting their metrics, and small
upstream instances. A gray version answering 20 % errors is rolled back by the analysis and
the gateway stops sending it traffic within one interval; a healthy one is promoted through
every step and ends as prod."""

import json
import random
import tempfile
import threading
import time
from collections import Counter

import httpx
import pytest
from django.conf import settings
from django.db import connection

from releases.models import Release
from testing.gateway_lab import FAILING_FIFTH, OK, auth
from testing.processes import AsgiServer, CeleryWorker, database_url, django_env
from testing.waiting import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

INTERVAL = 5
STEPS = [{"targeted": True}, {"percent": 50}, {"percent": 100}]
ANALYSIS = {
    "interval_s": INTERVAL,
    "min_requests": 30,
    "max_error_rate_increase": 5.0,
    "failures_tolerated": 1,
    "deadline_s": 60,
}


@pytest.fixture(scope="module")
def server(django_db_setup, django_db_blocker):
    """The dashboard with its jobs: in process without Redis, else a worker with beat."""
    with tempfile.TemporaryDirectory() as var_dir:
        env = django_env(
            database_url(connection.settings_dict), IN_PROCESS_JOBS="true", GRAYLANE_VAR_DIR=var_dir
        )
        with AsgiServer(env) as dashboard:
            if settings.REDIS_URL:
                with CeleryWorker(env, beat=True):
                    yield dashboard
            else:
                yield dashboard


class Traffic:
    """Requests through the gateway from a background thread, a third of them from the
    targeted user 1001, the rest from random users; answers counted per version."""

    def __init__(self, gateway):
        self.gateway = gateway
        self.versions: Counter = Counter()
        self.statuses: Counter = Counter()
        self.log: list[tuple[float, str]] = []
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self) -> None:
        rng = random.Random(14)
        with httpx.Client(base_url=self.gateway.url, timeout=5) as client:
            while not self.stopping.is_set():
                user = "1001" if rng.random() < 0.34 else str(rng.randrange(10**6))
                try:
                    answer = client.get("/user-app/hello", headers={"X-User-No": user})
                except httpx.HTTPError as exc:
                    self.statuses[type(exc).__name__] += 1
                    continue
                self.statuses[answer.status_code] += 1
                version = answer.json().get("version", "?") if answer.status_code == 200 else "?"
                if answer.status_code == 200:
                    self.versions[version] += 1
                    self.log.append((time.time(), version))
                time.sleep(0.01)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc_info):
        self.stopping.set()
        self.thread.join(10)


def start_release(lab) -> dict:
    headers = auth(lab.operator_token)
    body = {"service": "user-app", "to_version": "V2", "steps": STEPS, "analysis": ANALYSIS}
    created = httpx.post(lab.dashboard.url + "/api/v1/releases/", json=body, headers=headers)
    assert created.status_code == 201, created.text
    url = f"{lab.dashboard.url}/api/v1/releases/{created.json()['id']}"
    assert httpx.post(url + "/start/", headers=headers).status_code == 200
    return {"url": url, "headers": headers, "id": created.json()["id"]}


def wait_for_state(release, states, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        body = httpx.get(release["url"] + "/", headers=release["headers"]).json()
        if body["state"] in states:
            return body
        time.sleep(0.5)
    events = httpx.get(release["url"] + "/events/", headers=release["headers"]).json()
    raise AssertionError(f"still {body['state']} after {timeout} s: {events['results'][:4]}")


def persistent_instance(lab, version, mode):
    """An instance registered as persistent (ephemeral=false): the dashboard's own registry
    sync runs here, and this instance sends no heartbeats."""
    upstream = lab.fleet.add(version, mode)
    response = httpx.post(
        lab.dashboard.url + "/nacos/v1/ns/instance",
        params={
            "serviceName": "user-app",
            "ip": "127.0.0.1",
            "port": upstream.port,
            "ephemeral": "false",
            "metadata": json.dumps({"version": version}),
            "accessToken": lab.service_token,
        },
    )
    assert response.text == "ok", response.text
    return upstream


def fleet_with(lab, gray_mode):
    v1 = persistent_instance(lab, "V1", OK)
    v2 = persistent_instance(lab, "V2", gray_mode)
    lab.sync()
    lab.policy(enabled=True, routing=True, users=["1001"], header={"name": "", "value": ""})
    return v1, v2


def test_a_gray_version_answering_20_percent_errors_is_rolled_back(lab):
    _, v2 = fleet_with(lab, FAILING_FIFTH)
    gateway = lab.start_gateway()
    with Traffic(gateway) as traffic:
        release = start_release(lab)
        final = wait_for_state(release, {"rolled_back", "promoted", "failed"}, timeout=60)
        assert final["state"] == "rolled_back"
        rolled_back_at = time.time()
        time.sleep(INTERVAL)  # what this test promises: nothing reaches V2 after one interval
        served_gray = len(v2.received)
        time.sleep(3)  # ... and nothing in the three seconds after that
    # Within one interval of the decision, nothing reaches the gray instance any more,
    # not even the targeted user's requests.
    assert len(v2.received) == served_gray
    late = [version for at, version in traffic.log if at > rolled_back_at + INTERVAL]
    assert late and set(late) == {"V1"}
    events = httpx.get(release["url"] + "/events/", headers=release["headers"]).json()["results"]
    assert events[0]["kind"] == "rolled_back"
    decisive = next(e for e in events if e["kind"] == "analysis")
    assert decisive["detail"]["verdict"] == "rollback"
    gray = decisive["detail"]["since_start"]["gray"]
    assert gray["requests"] >= ANALYSIS["min_requests"]
    assert 10 < gray["error_rate"] < 30
    test = decisive["detail"]["test"]
    assert test["likelihood_ratio"] >= test["rollback_ratio"] or test["p_value"] <= test["alpha"]
    assert Release.objects.get(pk=release["id"]).state == "rolled_back"


def test_a_healthy_gray_version_is_promoted_through_every_step_and_ends_as_prod(lab):
    fleet_with(lab, OK)
    gateway = lab.start_gateway()
    with Traffic(gateway) as traffic:
        release = start_release(lab)
        final = wait_for_state(release, {"rolled_back", "promoted", "failed"}, timeout=90)
        assert final["state"] == "promoted", final
        wait_until(
            lambda: lab.gateway_row("gw-test")["status"] == "in_sync",
            what="the gateway to run the promoted routing",
        )
        after = len(traffic.log)
        time.sleep(2)  # the traffic of two seconds after it, all of it to V2
    assert {version for _, version in traffic.log[after:]} == {"V2"}, traffic.statuses
    events = httpx.get(release["url"] + "/events/", headers=release["headers"]).json()["results"]
    kinds = [e["kind"] for e in reversed(events) if e["kind"] != "analysis"]
    assert kinds[:2] == ["created", "started"]
    assert kinds[-1] == "promoted"
    assert [e["step"] for e in reversed(events) if e["kind"] == "advanced"] == [1, 2]
    service = httpx.get(
        lab.dashboard.url + "/api/v1/services/user-app/", headers=release["headers"]
    ).json()
    assert service["prod_version"] == "V2"
