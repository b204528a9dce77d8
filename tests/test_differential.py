"""The differential test (issue 23): one document with the gray lane and three more, over
10,000 generated requests through the simulator and, for real, each gateway engine with the
service SDK's balancer at the later hops of user-app -> order-app -> pay-app; not one
disagreement on the flag, lane and version at any hop (testing/differential.py says what
is generated and compared). A second test changes one rule in the document the gateway
gets, not in the simulator's, and the differential must report disagreements: it can fail.
"""

import json
import time

import httpx
import pytest

from policy.services import quarantine_version
from testing import differential as diff
from testing.agent_lab import engines as agent_engines
from testing.agent_lab import start_agent
from testing.waiting import wait_until
from tests.test_degraded_records import store_generation
from tests.test_lanes_through_gateways import Hop, create_lanes, register, runs_newest

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

REQUESTS = 10_000
FLIPPED_REQUESTS = 1_000
GATEWAY_OPTIONS = (
    "--poll-wait", "1", "--trusted-proxies", diff.TRUSTED_PROXIES,
    "--geoip", str(diff.GEOIP_TEST_DB),
)  # fmt: skip


def engines():
    """The Python gateway, and each agent engine (skipped with the reason where missing)."""
    return [pytest.param("python"), *agent_engines()]


def register_without_version(lab, service: str, port: int) -> None:
    response = httpx.post(
        lab.dashboard.url + "/nacos/v1/ns/instance",
        params={"serviceName": service, "ip": "127.0.0.1", "port": port, "ephemeral": "false",
                "metadata": json.dumps({}), "accessToken": lab.service_token},
    )  # fmt: skip
    assert response.text == "ok", response.text


@pytest.fixture
def fleet(lab, settings):
    """The document of testing/differential.py in force, with its instances serving: the
    echo servers first, then order-app's SDK instances, then user-app's, each balancer
    finding the next service's instances in the registry."""
    settings.GEOIP_DATABASE = str(diff.GEOIP_TEST_DB)  # the simulator's, as the gateways'
    for service, versions in diff.LEAF_INSTANCES.items():
        for version in versions:
            upstream = lab.fleet.add(version)
            if version == diff.NO_VERSION:
                register_without_version(lab, service, upstream.port)
            else:
                register(lab, service, upstream.port, version)
    hops = []
    try:
        for service, downstream in (("order-app", "pay-app"), ("user-app", "order-app")):
            hops += [Hop(lab, service, v, downstream) for v in diff.SDK_INSTANCES[service]]
        lab.sync()
        lab.policy(**diff.GRAY_RULES)
        quarantine_version(*diff.QUARANTINED, actor="release-analysis", source="release")
        create_lanes(lab, *diff.LANES)
        yield
    finally:
        for hop in hops:
            hop.stop()
            if "Traceback" in hop.final_log:  # what an instance failed with, for the report
                print(f"\n{hop.url} failed:\n{hop.final_log[-6000:]}")


def start_engine(lab, engine: str):
    if engine == "python":
        gateway, name = lab.start_gateway(*GATEWAY_OPTIONS), "gw-test"
    else:
        gateway, name = start_agent(lab, engine, *GATEWAY_OPTIONS), "gw-agent"
    wait_until(lambda: runs_newest(lab, name, gateway), 20, "the document in force")
    return gateway, name


@pytest.mark.parametrize("engine", engines())
def test_every_engine_agrees_with_the_simulator_at_every_hop(lab, fleet, engine):
    gateway, _ = start_engine(lab, engine)
    requests = diff.generate(REQUESTS)
    started = time.monotonic()
    wanted, matched = diff.expected(requests)
    simulated = time.monotonic() - started

    # The generator exercises what the document tells apart: every lane by every rule kind
    # (feature-x and feature-z also by their members' percent at user-app), fallbacks,
    # callers of both address families, trusted and not.
    for lane in ("gray", "feature-x", "feature-y", "feature-z"):
        for kind in ("header", "ip", "city", "user", "percent"):
            assert matched[(lane, kind)] > 0, (lane, kind, matched)
    assert matched[("PROD", None)] > 0
    seen = diff.coverage(requests, wanted)
    assert all(seen[("peer", kind)] for kind in ("trusted", "untrusted")), seen
    assert all(seen[("client", kind)] for kind in ("ipv4", "ipv6")), seen
    assert seen[("version", "order-app", "V1")] > seen[("version", "order-app", "V3")] > 0
    assert seen[("version", "order-app", "V2")] == 0  # quarantined
    for version in ("V1", "V2", "V3", "V4"):
        assert seen[("version", "user-app", version)] > 0
        assert seen[("version", "pay-app", version)] > 0

    started = time.monotonic()
    got = diff.drive(gateway.url, requests)
    sent = time.monotonic() - started
    report = diff.compare(engine, requests, wanted, got)
    print(f"\nsimulated in {simulated:.1f} s, sent in {sent:.1f} s\n{report.summary()}")
    assert report.hops >= 3 * REQUESTS
    assert report.disagreements == 0, report.summary()
    # An error answer (a timeout on a loaded machine) is sent again, and its second answer
    # compared; more than a few is a failure of its own.
    assert len(report.resent) <= REQUESTS // 1000, report.summary()


@pytest.mark.parametrize("engine", engines())
def test_a_rule_changed_in_the_gateways_document_only_is_reported(lab, fleet, engine):
    gateway, name = start_engine(lab, engine)
    number = store_generation(lab, diff.flip_lane_header("feature-x"))
    wait_until(lambda: runs_newest(lab, name, gateway), 20, "the flipped document")
    assert gateway.generation() == number
    requests = diff.generate(FLIPPED_REQUESTS, seed=24)
    wanted, _ = diff.expected(requests)
    report = diff.compare(engine, requests, wanted, diff.drive(gateway.url, requests))
    print("\n" + report.summary())
    assert report.disagreements > 0
    # Only the requests the flipped header rule decides disagree: those sending it.
    flipped = {r.index for r in requests if r.sends("x-lane", "feature-x")}
    assert set(report.disagreeing) <= flipped
    assert report.examples[0]["expected"]["lane"] == "feature-x"
