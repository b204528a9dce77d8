"""Lanes through real gateways, from a real dashboard:

* the Python gateway in front of a 3-hop path, gateway -> user-app -> order-app -> pay-app,
  user-app and order-app instances on the service SDK (its middleware and balancer, real
  processes), pay-app's the gateway lab's servers; lanes made with the lanes API, a version
  quarantined as a release's rollback does: each hop reaches its lane's version where the
  lane has one with a routable instance, prod elsewhere, and falls back to prod where the
  lane's version has no instance; no hop reaches a quarantined version or another lane's;
  what a client sends of a route is dropped;
* a stored document with lanes no gateway can use (as a dashboard of another version could
  send): acked in sync with those lanes listed, the rest applied;
* the agent (Envoy, nginx), which carries every lane (tests/test_agent_lanes.py compares
  its routes with the Python gateway's).
"""

import json
import os
import sys

import httpx
import pytest

from gateways.models import Generation
from policy.services import quarantine_version
from testing.agent_lab import engines, start_agent
from testing.gateway_lab import auth
from testing.processes import Process, free_port
from testing.waiting import wait_until
from tests.test_degraded_records import acked, store_generation
from tests.test_gateway_routing import SEED_RULES

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def lane(name: str, priority: int, members: dict[str, str]) -> dict:
    """A lane as the lanes API and the gateway document have it, matched by the header
    `x-lane: <name>`."""
    return {
        "name": name,
        "priority": priority,
        "match": {"header": {"name": "x-lane", "value": name}, "ips": [], "cities": [],
                  "users": [], "percent": 0},
        "members": {service: {"version": version, "percent": 0, "targeted": True}
                    for service, version in members.items()},
    }  # fmt: skip


# feature-x: user-app V3 (an instance), order-app V4 (none: prod instead), pay-app V3 (one).
# feature-y: pay-app V3 only. The gray lane: the policy's header, the services' V2.
FEATURE_X = lane("feature-x", 100, {"user-app": "V3", "order-app": "V4", "pay-app": "V3"})
FEATURE_Y = lane("feature-y", 200, {"pay-app": "V3"})


def create_lanes(lab, *lanes: dict) -> None:
    for one in lanes:
        response = httpx.post(
            lab.dashboard.url + "/api/v1/lanes/", json=one, headers=auth(lab.operator_token)
        )
        assert response.status_code == 201, response.text


def runs_newest(lab, name: str, process):
    """The gateway's row once it runs the newest generation, in sync."""
    return acked(lab, name, Generation.objects.order_by("-number").first().number, process)


def with_lanes(*lanes: dict):
    """A stored document's change: these lanes (as they are, usable or not)."""

    def mutate(document: dict) -> None:
        document["lanes"] = list(lanes)
        document["gray_priority"] = 1000

    return mutate


def register(lab, service: str, port: int, version: str) -> None:
    """Registered for good (no heartbeats needed: the test outlives an ephemeral one's)."""
    response = httpx.post(
        lab.dashboard.url + "/nacos/v1/ns/instance",
        params={"serviceName": service, "ip": "127.0.0.1", "port": port, "ephemeral": "false",
                "metadata": json.dumps({"version": version}), "accessToken": lab.service_token},
    )  # fmt: skip
    assert response.text == "ok", response.text


class Hop(Process):
    """dataplane/sdk/tests/hop_app.py: an instance on the SDK, registered."""

    def __init__(self, lab, service: str, version: str, downstream: str | None = None):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/{service}"
        args = [sys.executable, "-m", "dataplane.sdk.tests.hop_app", service, version]
        args += [
            str(self.port),
            lab.dashboard.url + "/nacos",
            *([downstream] if downstream else []),
        ]
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "DJANGO_"))}
        super().__init__(args, {**env, "REGISTRY_ACCESS_TOKEN": lab.service_token})
        self.start()
        register(lab, service, self.port, version)

    def is_ready(self) -> bool:
        try:
            return httpx.get(self.url + "/-/ready", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False


def path(gateway, **headers) -> list[tuple[str, str, str, str | None]]:
    """(service, version, flag, lane) at each hop of one request to user-app."""
    response = httpx.get(gateway.url + "/user-app/hop", headers=headers, timeout=10)
    assert response.status_code == 200, response.text
    hops = []
    answer = response.json()
    while "downstream" in answer:  # the SDK hops
        assert "error" not in answer["downstream"], answer
        hops.append((answer["service"], answer["version"], answer["flag"], answer["lane"]))
        answer = answer["downstream"]
    received = answer["headers"]  # the leaf: the lab's server, which echoes what it got
    hops.append(
        ("pay-app", answer["version"], received["x-gray-status"], received.get("x-gray-lane"))
    )
    return hops


@pytest.fixture
def call_path(lab):
    """The 3-hop path, every version of it up: user-app V1 V2 V3 and order-app V1 V2 on the
    SDK, pay-app V1 V3; order-app's V2 quarantined, both lanes made; and a gateway running
    the generation that says so."""
    for version in ("V1", "V3"):
        register(lab, "pay-app", lab.fleet.add(version).port, version)
    hops = [Hop(lab, "order-app", version, "pay-app") for version in ("V1", "V2")]
    hops += [Hop(lab, "user-app", version, "order-app") for version in ("V1", "V2", "V3")]
    try:
        lab.sync()
        lab.policy(**SEED_RULES)
        quarantine_version("order-app", "V2", actor="release-analysis", source="release")
        create_lanes(lab, FEATURE_X, FEATURE_Y)
        gateway = lab.start_gateway("--poll-wait", "1")
        wait_until(lambda: runs_newest(lab, "gw-test", gateway), 10, "the lanes in force")
        yield gateway
    finally:
        for hop in hops:
            hop.stop()


def test_each_hop_reaches_its_lanes_version_or_prod_and_never_another_lanes(lab, call_path):
    gateway = call_path
    for _ in range(3):
        assert path(gateway, **{"x-lane": "feature-x"}) == [
            ("user-app", "V3", "GRAY", "feature-x"),
            ("order-app", "V1", "GRAY", "feature-x"),  # its V4 has no instance: prod
            ("pay-app", "V3", "GRAY", "feature-x"),  # the lane goes on past the fallback
        ]
        # Not a member at the gateway nor at order-app: prod there, though user-app's V3
        # (feature-x's) and V2 (gray's) are up.
        assert path(gateway, **{"x-lane": "feature-y"}) == [
            ("user-app", "V1", "GRAY", "feature-y"),
            ("order-app", "V1", "GRAY", "feature-y"),
            ("pay-app", "V3", "GRAY", "feature-y"),
        ]
        assert path(gateway, gray="gray-996") == [
            ("user-app", "V2", "GRAY", "gray"),
            ("order-app", "V1", "GRAY", "gray"),  # its V2 is quarantined, though registered
            ("pay-app", "V1", "GRAY", "gray"),  # no V2: prod
        ]
        # Both lanes' rules match: feature-x comes first (priority 100 < the gray lane's 1000).
        assert path(gateway, gray="gray-996", **{"x-lane": "feature-x"})[0][1:] == (
            "V3",
            "GRAY",
            "feature-x",
        )
        assert path(gateway) == [
            ("user-app", "V1", "PROD", None),
            ("order-app", "V1", "PROD", None),
            ("pay-app", "V1", "PROD", None),
        ]
    # Counted by lane too (the window goes into the totals once a second).
    counted = (
        'graylane_gateway_requests_total{lane="feature-x",service="user-app",version="V3"} 6.0'
    )
    wait_until(lambda: counted in httpx.get(gateway.url + "/-/metrics").text, 5, "the count")


def test_a_client_cannot_choose_its_route_by_any_header(lab, call_path):
    gateway = call_path
    forged = {
        "X-Gray-Status": "GRAY",
        "X-Gray-Lane": "feature-x",
        "X-Gray-Versions": "*=V3/V1,user-app=V3",
        "baggage": "graylane.gray=GRAY,graylane.lane=feature-x,tenant=acme",
    }
    assert path(gateway, **forged) == [
        ("user-app", "V1", "PROD", None),
        ("order-app", "V1", "PROD", None),
        ("pay-app", "V1", "PROD", None),
    ]
    answer = httpx.get(gateway.url + "/user-app/hop", headers=forged, timeout=10).json()
    assert answer["received"] == {
        "x-gray-status": "PROD",
        "x-gray-lane": None,
        "x-gray-versions": "*=V1,!order-app=V2",
        "baggage": "tenant=acme,graylane.gray=PROD",
    }
    # The hops after it pass the gateway's route on as they got it (the client's other
    # baggage is OpenTelemetry's to propagate, not the SDK's).
    assert answer["downstream"]["received"] == {
        **answer["received"],
        "baggage": "graylane.gray=PROD",
    }


def test_a_document_with_a_lane_no_gateway_can_use_is_acked_with_the_rest_applied(lab):
    v1 = lab.instance("user-app", "V1")
    lab.instance("user-app", "V3")
    lab.sync()
    lab.policy(**SEED_RULES)
    gateway = lab.start_gateway("--poll-wait", "1")
    bad_name = {**FEATURE_Y, "name": "Feature Y"}
    bad_priority = {**lane("feature-z", 300, {}), "priority": "high"}
    number = store_generation(lab, with_lanes(FEATURE_X, bad_name, bad_priority))
    row = wait_until(lambda: acked(lab, "gw-test", number, gateway), 10, "the ack")
    assert row["last_error"] == ""
    assert {entry["record"]: entry["reason"] for entry in row["skipped"]} == {
        "lanes[1]": "'Feature Y' is not a lane name: 1-63 lower-case letters, digits and '-', "
        "a letter or digit first.",
        "lanes[feature-z]": "priority: Must be a whole number from 0 to 1000000, got 'high'.",
    }
    answer = httpx.get(gateway.url + "/user-app/hello", headers={"x-lane": "feature-x"}).json()
    assert (answer["version"], answer["headers"]["x-gray-lane"]) == ("V3", "feature-x")
    assert httpx.get(gateway.url + "/user-app/hello").json()["instance"] == v1.name


@pytest.mark.parametrize("engine", engines())
def test_the_agent_carries_every_lane_and_skips_none(lab, engine):
    for version in ("V1", "V2", "V3"):
        lab.instance("user-app", version)
    lab.sync()
    lab.policy(**SEED_RULES)
    create_lanes(lab, FEATURE_X, FEATURE_Y)
    agent = start_agent(lab, engine, "--poll-wait", "1")
    row = wait_until(lambda: runs_newest(lab, "gw-agent", agent), 15, "the agent's ack")
    assert row["skipped"] == []

    def route(**headers) -> tuple[str, str | None]:
        answer = httpx.get(agent.url + "/user-app/hello", headers=headers, timeout=5).json()
        return answer["version"], answer["headers"].get("x-gray-lane")

    assert route(gray="gray-996") == ("V2", "gray")
    assert route(**{"x-lane": "feature-x"}) == ("V3", "feature-x")
    # user-app is not in feature-y: its prod, in the lane.
    assert route(**{"x-lane": "feature-y"}) == ("V1", "feature-y")
    assert route() == ("V1", None)
