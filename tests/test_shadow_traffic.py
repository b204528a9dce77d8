"""Shadow traffic with real processes: a dashboard, the Python gateway and instances on
loopback. A release mirroring user-app's prod traffic to a V2 that answers differently on
one path (another body) and fails on another: the diff names both paths, only idempotent
requests are copied, each copy carries X-Gray-Shadow, and the copies' 5xx count in no metric
(neither the gateway's nor the dashboard's, so not in the release analysis). Envoy and nginx,
through the agent, route without the mirror and say so in their ack."""

import time

import httpx
import pytest

from dataplane.agent.ir import MIRROR_SKIPPED
from testing.agent_lab import engines, start_agent
from testing.gateway_lab import STATIC, auth
from testing.waiting import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

DIFFERS = "/user-app/differs"
BROKEN = "/user-app/broken"
SAME = "/user-app/same"


def shadow_fleet(lab):
    """user-app at V1 and V2 answering alike, but for V2's other body on DIFFERS and 500 on
    BROKEN; nobody routed to V2 (a header nobody sends)."""
    v1, v2 = lab.fleet.add("V1", STATIC), lab.fleet.add("V2", STATIC)
    v2.answers = {DIFFERS: (200, b'{"path": "other"}'), BROKEN: (500, b'{"error": "v2"}')}
    for upstream in (v1, v2):
        lab.register("user-app", upstream.port, upstream.version)
    lab.sync()
    lab.policy(enabled=True, routing=True, header={"name": "x-tester", "value": "yes"})
    return v1, v2


def mirroring_release(lab, percent) -> dict:
    headers = auth(lab.operator_token)
    body = {
        "service": "user-app",
        "to_version": "V2",
        "steps": [{"targeted": True}, {"percent": 100}],
        "analysis": {"interval_s": 300, "min_requests": 1000, "deadline_s": 3600},
        "mirror": {"percent": percent},
    }
    created = httpx.post(lab.dashboard.url + "/api/v1/releases/", json=body, headers=headers)
    assert created.status_code == 201, created.text
    assert created.json()["mirror"] == {"percent": percent}
    url = f"{lab.dashboard.url}/api/v1/releases/{created.json()['id']}"
    assert httpx.post(url + "/start/", headers=headers).status_code == 200
    return {"url": url, "headers": headers, "id": created.json()["id"]}


def in_sync(lab, gateway) -> None:
    def running_newest() -> bool:
        row = lab.gateway_row("gw-test")
        return (
            row["status"] == "in_sync"
            and row["acked_generation"] == row["desired_generation"] == gateway.generation()
        )

    wait_until(running_newest, what="the gateway to run the release's generation")


def test_a_shadow_run_names_the_path_where_v2_answers_differently(lab):
    v1, v2 = shadow_fleet(lab)
    gateway = lab.start_gateway("--metrics-interval", "0.5")
    release = mirroring_release(lab, 100)
    in_sync(lab, gateway)
    since = int(time.time()) - 1
    with httpx.Client(base_url=gateway.url) as client:
        for path, times in ((SAME, 20), (DIFFERS, 10), (BROKEN, 10)):
            for number in range(times):
                answer = client.get(f"{path}?n={number}")
                assert answer.status_code == 200, answer.text  # prod (V1) answers them all
        for number in range(10):
            assert client.post(SAME, json={"n": number}).status_code == 200
            assert client.delete(f"{SAME}?n={number}").status_code == 200
    wait_until(lambda: len(v2.received) >= 40, what="the 40 GET copies to reach V2")

    # Copies only of the idempotent requests, each marked; V1 served every request itself.
    assert {r.method for r in v2.received} == {"GET"}
    assert all(r.headers.get("x-gray-shadow") == "true" for r in v2.received)
    assert len(v1.received) == 60
    assert not any("x-gray-shadow" in r.headers for r in v1.received)

    def summary() -> dict:
        return httpx.get(release["url"] + "/shadow/", headers=release["headers"]).json()

    wait_until(lambda: summary()["comparisons"] == 40, what="the 40 comparisons reported")
    diff = summary()
    paths = {entry["path"]: entry for entry in diff["differing_paths"]}
    assert set(paths) == {DIFFERS, BROKEN}
    assert paths[DIFFERS]["body_mismatched"] == 10
    assert paths[DIFFERS]["status_mismatched"] == 0
    assert paths[BROKEN]["status_mismatched"] == 10
    assert paths[BROKEN]["example"] == {"prod_status": 200, "mirror_status": 500}
    assert diff["status_classes"] == {"2xx": {"total": 40, "mismatched": 10, "rate": 25.0}}
    assert diff["mismatch_rate"] == 50.0
    assert diff["latency_ms"]["p50"]["shift"] is not None

    # The copies' answers (V2's ten 500s among them) count in no metric.
    time.sleep(1.5)  # two more metric reports
    page = httpx.get(gateway.url + "/-/metrics").text
    assert 'version="V2"' not in page
    requests = [line for line in page.splitlines() if line.startswith("graylane_gateway_requests")]
    assert len(requests) == 1 and requests[0].endswith(" 60.0")  # the clients' own, V1's
    assert 'graylane_gateway_errors_total{lane="",service="user-app",version="V1"} 0.0' in page
    series = httpx.get(
        lab.dashboard.url + "/api/v1/metrics/success-rate/",
        params={"service": "user-app", "since": since - 60},
        headers=release["headers"],
    ).json()["series"]
    assert set(series) == {"V1"}


def test_a_client_cannot_pass_for_a_shadow_copy(lab):
    v1, _ = shadow_fleet(lab)
    gateway = lab.start_gateway()
    answer = httpx.get(gateway.url + SAME, headers={"X-Gray-Shadow": "true"})
    assert answer.status_code == 200
    assert "x-gray-shadow" not in v1.received[-1].headers


@pytest.mark.parametrize("engine", engines())
def test_envoy_and_nginx_run_without_the_mirror_and_ack_it_as_skipped(lab, engine):
    v1, v2 = shadow_fleet(lab)
    lane = {
        "name": "feature-x",
        "priority": 100,
        "match": {"header": {"name": "x-lane", "value": "feature-x"}},
        "members": {"user-app": {"version": "V2", "mirror": {"percent": 50}}},
    }
    created = httpx.post(
        lab.dashboard.url + "/api/v1/lanes/", json=lane, headers=auth(lab.operator_token)
    )
    assert created.status_code == 201, created.text
    agent = start_agent(lab, engine)

    def skipped() -> list:
        row = lab.gateway_row("gw-agent")
        return row["status"] == "in_sync" and row["skipped"]

    [entry] = wait_until(skipped, what="the agent's ack")
    assert entry["record"] == "lanes[feature-x].members.user-app.mirror"
    assert entry["reason"] == MIRROR_SKIPPED
    for number in range(20):  # routed all the same, and nothing copied
        assert httpx.get(f"{agent.url}{SAME}?n={number}").status_code == 200
    assert len(v1.received) == 20 and not v2.received
