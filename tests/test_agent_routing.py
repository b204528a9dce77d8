"""Envoy and nginx, driven by `python -m dataplane.agent`, route real requests as the
reference design's three scenarios and each gray rule say: a real dashboard, instances
registered in its embedded registry, the engine's own process, all over loopback."""

import time
from collections import Counter

import httpx
import pytest

from routing_engine import service_bucket, service_seed, user_bucket
from testing.agent_lab import engines, start_agent
from testing.gateway_lab import SLOW_SECONDS, SLOW_SUFFIX
from tests.test_gateway_routing import SEED_RULES, get

pytestmark = [
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
    pytest.mark.parametrize("engine", engines()),
]


def test_scenario_2_a_plain_request_goes_to_prod_and_says_so(lab, two_versions, engine):
    agent = start_agent(lab, engine)
    for _ in range(4):
        answer = get(agent).json()
        assert (answer["version"], answer["gray_status"]) == ("V1", "PROD")
    assert answer["headers"]["x-forwarded-for"] == "127.0.0.1"
    assert answer["headers"]["x-forwarded-proto"] == "http"


def test_scenario_3_the_gray_header_goes_to_gray(lab, two_versions, engine):
    agent = start_agent(lab, engine)
    for _ in range(4):
        answer = get(agent, gray="gray-996").json()
        assert (answer["version"], answer["gray_status"]) == ("V2", "GRAY")
    assert get(agent, gray="gray-997").json()["version"] == "V1"
    assert get(agent, gray="GRAY-996").json()["version"] == "V1"


def test_scenario_1_switch_off_reaches_every_version_even_with_the_header(
    lab, two_versions, engine
):
    lab.policy(enabled=False, routing=False)
    agent = start_agent(lab, engine)
    answers = [get(agent, gray="gray-996").json() for _ in range(10)]
    # Each engine worker keeps its own round robin: both versions, not exactly 5 and 5.
    assert {a["version"] for a in answers} == {"V1", "V2"}
    assert {a["gray_status"] for a in answers} == {"ALL"}


def test_a_client_cannot_choose_its_own_flag_lane_or_versions(lab, two_versions, engine):
    agent = start_agent(lab, engine)
    forged = {"X-Gray-Status": "GRAY", "X-Gray-Lane": "feature-x", "X-Gray-Versions": "*=V2"}
    answer = get(agent, **forged).json()
    assert (answer["version"], answer["gray_status"]) == ("V1", "PROD")
    # Those would steer the SDK's later hops: the gateway's own, as the Python gateway's.
    assert "x-gray-lane" not in answer["headers"]
    assert answer["headers"]["x-gray-versions"] == "*=V1"


def test_a_listed_user_goes_to_gray(lab, two_versions, engine):
    lab.policy(users=["1001"])
    agent = start_agent(lab, engine)
    assert get(agent, **{"X-User-No": "1001"}).json()["version"] == "V2"
    assert get(agent, **{"X-User-No": "1002"}).json()["version"] == "V1"


def test_a_listed_network_goes_to_gray_via_x_forwarded_for_from_a_trusted_proxy(
    lab, two_versions, engine
):
    lab.policy(ips=["203.0.113.0/24"])
    trusting = start_agent(lab, engine, "--trusted-proxies", "127.0.0.0/8", name="gw-trusting")
    answer = get(trusting, **{"X-Forwarded-For": "203.0.113.9"}).json()
    assert answer["version"] == "V2"
    assert answer["headers"]["x-forwarded-for"] == "203.0.113.9, 127.0.0.1"
    assert get(trusting, **{"X-Forwarded-For": "198.51.100.1"}).json()["version"] == "V1"
    plain = start_agent(lab, engine, name="gw-plain")
    assert get(plain, **{"X-Forwarded-For": "203.0.113.9"}).json()["version"] == "V1"


def test_the_city_is_local_on_loopback_and_the_header_of_a_trusted_proxy(lab, two_versions, engine):
    lab.policy(cities=["local", "Beijing"])
    plain = start_agent(lab, engine, name="gw-plain")
    assert get(plain).json()["version"] == "V2"
    lab.policy(cities=["Beijing"])
    trusting = start_agent(lab, engine, "--trusted-proxies", "127.0.0.0/8", name="gw-trusting")
    assert get(trusting, **{"X-City": "beijing"}).json()["version"] == "V2"
    assert get(trusting, **{"X-City": "Shanghai"}).json()["version"] == "V1"
    # Not through a trusted proxy, the header is the client's word: not believed.
    _wait_for_generation(plain, lab)
    assert get(plain, **{"X-City": "Beijing"}).json()["version"] == "V1"


def test_the_percent_is_sticky_per_user(lab, two_versions, engine):
    lab.policy(percent=30)
    agent = start_agent(lab, engine)
    users = [f"user-{n}" for n in range(60)]
    sides = {user: get(agent, **{"X-User-No": user}).json()["version"] for user in users}
    assert {user: get(agent, **{"X-User-No": user}).json()["version"] for user in users} == sides
    assert 6 <= Counter(sides.values())["V2"] <= 30
    assert get(agent).json()["version"] == "V1"  # no user id: not in the percent
    # The same buckets as routing_engine, in both engines.
    assert sides == {u: "V2" if user_bucket(u) < 3000 else "V1" for u in users}


def test_a_gray_request_falls_back_to_prod_without_gray_instances(lab, engine):
    lab.instance("user-app", "V1")
    lab.sync()
    lab.policy(**SEED_RULES)
    agent = start_agent(lab, engine)
    answer = get(agent, gray="gray-996").json()
    assert (answer["version"], answer["gray_status"]) == ("V1", "GRAY")
    assert get(agent, "/no-such-app/hello").status_code == 404


def test_the_engine_and_its_version_are_acked(lab, two_versions, engine):
    agent = start_agent(lab, engine)
    row = _wait_for_generation(agent, lab)
    assert row["engine"] == engine
    assert row["engine_version"][0].isdigit()


def _wait_for_generation(agent, lab) -> dict:
    """The gateway's row once its engine runs the newest generation and it has acked it."""
    for _ in range(100):
        row = lab.gateway_row(agent_name(agent, lab))
        if row["status"] == "in_sync" and agent.generation() == row["acked_generation"]:
            return row
        time.sleep(0.1)
    raise AssertionError(f"not in sync: {row}")


def agent_name(agent, lab) -> str:
    return next(name for name, token in lab.tokens.items() if token in agent.args)


def test_per_version_metrics_from_the_access_log_reach_the_dashboard(lab, two_versions, engine):
    agent = start_agent(lab, engine)
    since = int(time.time()) - 5
    for _ in range(6):
        get(agent)
    for _ in range(4):
        get(agent, gray="gray-996")
    series: dict = {}
    for _ in range(50):
        answer = httpx.get(
            lab.dashboard.url + "/api/v1/metrics/success-rate/",
            params={"service": "user-app", "since": since, "step": 3600},
            headers={"Authorization": f"Token {lab.operator_token}"},
        )
        series = answer.json()["series"]
        totals = {version: sum(point[2] for point in points) for version, points in series.items()}
        if totals == {"V1": 6, "V2": 4}:
            break
        time.sleep(0.2)
    assert {v: [p[1] for p in points] for v, points in series.items()} == {
        "V1": [100.0],
        "V2": [100.0],
    }
    assert totals == {"V1": 6, "V2": 4}


def test_the_latency_from_the_access_log_is_what_the_requests_took(lab, engine):
    lab.instance("user-app", "V1")
    lab.sync()
    lab.policy(**SEED_RULES)
    agent = start_agent(lab, engine)
    since = int(time.time()) - 5
    client_ms = []
    for _ in range(20):
        started = time.perf_counter()
        assert get(agent, "/user-app/hello" + SLOW_SUFFIX).status_code == 200
        client_ms.append(1000 * (time.perf_counter() - started))
    points: list = []
    for _ in range(50):
        answer = httpx.get(
            lab.dashboard.url + "/api/v1/metrics/latency/",
            params={"service": "user-app", "since": since, "step": 3600},
            headers={"Authorization": f"Token {lab.operator_token}"},
        )
        points = answer.json()["series"].get("V1", [])
        if sum(total for _, _, total in points) == 20:
            break
        time.sleep(0.2)
    [[_, p95, total]] = points
    # The series' p95 is the upper edge of its bucket: up to 19 % above the true one.
    assert total == 20 and 1000 * SLOW_SECONDS <= p95 <= 1.19 * max(client_ms), (p95, client_ms)


def test_a_service_of_its_own_percent_puts_the_engines_users_in_gray(lab, two_versions, engine):
    """A release step's percent for one service (services.{name}.percent, hashed with the
    service's name) and targeted false: only the percent sends its requests to gray."""
    response = httpx.patch(
        lab.dashboard.url + "/api/v1/services/user-app/",
        json={"percent": 30, "targeted": False},
        headers={"Authorization": f"Token {lab.operator_token}"},
    )
    assert response.status_code == 200, response.text
    agent = start_agent(lab, engine)
    assert get(agent, gray="gray-996").json()["version"] == "V1"  # not targeted
    users = [f"user-{n}" for n in range(60)]
    sides = {user: get(agent, **{"X-User-No": user}).json()["version"] for user in users}
    assert 6 <= Counter(sides.values())["V2"] <= 30
    if engine == "envoy":  # the engine's buckets for this service (nginx: docs/agent.md)
        seed = service_seed("user-app")
        expected = {u: "V2" if service_bucket("user-app", u, seed) < 3000 else "V1" for u in users}
        assert sides == expected
