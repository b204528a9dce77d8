"""Lanes through Envoy and nginx, driven by the agent, decided exactly as the Python gateway
decides them: a real dashboard with lanes of every rule kind, the Python gateway and the
agent (each engine) polling it, and the same requests sent through both. What reaches the
instance must be the same: the version, X-Gray-Status, X-Gray-Lane, X-Gray-Versions,
baggage and X-Forwarded-For.

Both deciders share nothing but the document: the agent's Lua (dataplane/agent/decide.lua)
runs over routing_engine.portable's export of the rules, the gateway over GrayMatcher.
"""

import httpx
import pytest

from policy.services import quarantine_version
from routing_engine import user_bucket
from testing.agent_lab import engines, start_agent
from testing.waiting import wait_until
from tests.test_gateway_routing import GEOIP_TEST_DB, SEED_RULES
from tests.test_lanes_through_gateways import create_lanes, runs_newest

pytestmark = [
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
    pytest.mark.parametrize("engine", engines()),
]

TRUSTED = ("--trusted-proxies", "127.0.0.0/8")
# What the instance received of the route, and where the request went.
SEEN = ("x-gray-status", "x-gray-lane", "x-gray-versions", "baggage", "x-forwarded-for")


def match(**rules) -> dict:
    return {"header": {"name": "", "value": ""}, "ips": [], "cities": [], "users": [],
            "percent": 0, **rules}  # fmt: skip


LANES = [
    {  # before the gray lane: every rule kind but the percent
        "name": "feature-x",
        "priority": 100,
        "match": match(
            header={"name": "x-lane", "value": "feature-x"},
            ips=["198.51.100.0/24", "2001:db8:1::/48"],
            cities=["Shanghai", "Straße"],
            users=["2002", "josé"],
        ),
        "members": {"user-app": "V3", "order-app": "V3"},
    },
    {  # a member without an instance of its version: prod at that hop
        "name": "feature-z",
        "priority": 50,
        "match": match(header={"name": "x-lane", "value": "feature-z"}),
        "members": {"order-app": "V9"},
    },
    {  # after the gray lane: a lane-wide percent, a member's own, an untargeted member
        "name": "feature-y",
        "priority": 2000,
        "match": match(percent=5, users=["1001"]),
        "members": {
            "user-app": {"version": "V3", "percent": 7.5},
            "order-app": {"version": "V3", "targeted": False},
        },
    },
]


@pytest.fixture
def world(lab):
    """user-app V1 V2 V3, order-app V1 V3, pay-app V1 and V4 (quarantined); the gray
    policy with every rule kind; the lanes above; the Python gateway in force."""
    for service, versions in (
        ("user-app", ("V1", "V2", "V3")),
        ("order-app", ("V1", "V3")),
        ("pay-app", ("V1", "V4")),
    ):
        for version in versions:
            lab.instance(service, version)
    lab.sync()
    lab.policy(
        **{
            **SEED_RULES,
            "ips": ["203.0.113.0/24", "2001:db8::/32"],
            "cities": ["Beijing", "München", "London"],
            "users": ["1001"],
            "percent": 12.34,
        }
    )
    quarantine_version("pay-app", "V4", actor="release-analysis", source="release")
    create_lanes(lab, *LANES)
    gateway = lab.start_gateway(*TRUSTED, "--geoip", str(GEOIP_TEST_DB), "--poll-wait", "1")
    wait_until(lambda: runs_newest(lab, "gw-test", gateway), 10, "the gateway's ack")
    return gateway


def seen(proxy, service: str, headers: dict | list) -> tuple:
    response = httpx.get(f"{proxy.url}/{service}/hello", headers=headers, timeout=5)
    if response.status_code != 200:
        return (response.status_code,)
    answer = response.json()
    return (answer["version"], *(answer["headers"].get(name) for name in SEEN))


def agent_for(lab, engine: str, *extra: str):
    agent = start_agent(lab, engine, *TRUSTED, *extra, "--poll-wait", "1")
    row = wait_until(lambda: runs_newest(lab, "gw-agent", agent), 15, "the agent's ack")
    assert row["skipped"] == [], row["skipped"]  # every lane is rendered
    return agent


DOUBLE_CHAIN = [("X-Forwarded-For", "198.51.100.7"), ("X-Forwarded-For", "203.0.113.9")]
CASES = [
    {},
    {"gray": "gray-996"},
    {"gray": "gray-996", "x-lane": "feature-x"},  # feature-x is tried first
    {"x-lane": "feature-x"},
    {"x-lane": "feature-z"},
    {"x-lane": "Feature-X"},
    {"X-Forwarded-For": "203.0.113.9"},
    {"X-Forwarded-For": "198.51.100.7"},
    {"X-Forwarded-For": "2001:db8::1"},
    {"X-Forwarded-For": "2001:db8:1::1"},
    {"X-Forwarded-For": "::ffff:203.0.113.9"},
    {"X-Forwarded-For": "198.51.100.7, 127.0.0.5"},  # the nearest untrusted hop
    {"X-Forwarded-For": "203.0.113.9, junk"},  # garbled: the peer
    {"X-Forwarded-For": "203.0.113.09"},  # not an address to ipaddress: the peer
    {"X-City": "beijing"},
    {"X-City": "SHANGHAI"},
    {"X-City": "STRASSE"},  # casefolded: Straße
    {"X-City": b"M\xfcnchen"},  # Latin-1 bytes, as the gateway reads a header
    {"X-City": b"M\xc3\xbcnchen"},  # UTF-8 bytes read as Latin-1: no city listed
    {"X-City": ""},
    {"X-User-No": "1001"},  # listed in gray and in feature-y: gray comes first
    {"X-User-No": "2002"},
    {"X-User-No": b"jos\xe9"},
    {"X-User-No": ""},
    {"baggage": "graylane.gray=GRAY,graylane.lane=feature-x,tenant=acme, ,x=1"},
    {"X-Gray-Status": "GRAY", "X-Gray-Lane": "feature-x", "X-Gray-Versions": "*=V3"},
    # Headers sent twice: the decision reads the last, the chain and baggage join them.
    [("X-User-No", "1"), ("X-User-No", "2002")],
    DOUBLE_CHAIN,
    [("baggage", "a=1"), ("baggage", "graylane.lane=feature-x,b=2")],
]


def test_every_rule_kind_routes_and_says_so_as_the_python_gateway(lab, world, engine):
    agent = agent_for(lab, engine, "--geoip", str(GEOIP_TEST_DB))
    for headers in CASES + [{"X-Forwarded-For": "81.2.69.142"}]:  # London, by GeoIP
        for service in ("user-app", "order-app", "pay-app"):
            expected = seen(world, service, headers)
            if engine == "envoy" and headers == DOUBLE_CHAIN:
                # Envoy's codec joins the two headers with "," before the filter sees them
                # (the Python gateway with ", "): the same hops, written closer.
                expected = (*expected[:5], "198.51.100.7,203.0.113.9, 127.0.0.1")
            assert seen(agent, service, headers) == expected, (service, headers)


def lanes_of(proxy, service: str, users: list[str]) -> list[str | None]:
    """The lane each user's request is routed in (None: not GRAY), on one connection."""
    with httpx.Client(base_url=proxy.url, timeout=5) as client:
        return [
            client.get(f"/{service}/hello", headers={"X-User-No": user})
            .json()["headers"]
            .get("x-gray-lane")
            for user in users
        ]


def test_percent_users_are_the_engines(lab, world, engine):
    """2,000 users: the same lane for each as the Python gateway, at user-app (feature-y's
    member percent beside the gray lane's 12.34 % and feature-y's 5 %) and at order-app (its
    untargeted member: the gray lane's percent only)."""
    agent = agent_for(lab, engine)
    users = [str(n) for n in range(100_000, 102_000)]
    for service in ("order-app", "user-app"):
        expected = lanes_of(world, service, users)
        assert lanes_of(agent, service, users) == expected, service
    lanes = dict(zip(users, expected, strict=True))
    assert {user for user, lane in lanes.items() if lane == "gray"} == {
        user for user in users if user_bucket(user) < 1234
    }
    assert 100 < sum(lane == "feature-y" for lane in lanes.values()) < 400


def test_a_city_behind_a_trusted_proxy_is_the_clients(lab, world, engine):
    """GeoIP looks up the client that X-Forwarded-For names behind a trusted proxy (the test
    database's London), not the proxy; from an untrusted peer, the peer (loopback)."""
    trusting = agent_for(lab, engine, "--geoip", str(GEOIP_TEST_DB))
    london = {"X-Forwarded-For": "81.2.69.142"}
    assert seen(trusting, "user-app", london)[:3] == ("V2", "GRAY", "gray")
    assert seen(trusting, "user-app", {"X-Forwarded-For": "198.51.100.1"})[:3] == (
        "V3",
        "GRAY",
        "feature-x",
    )
    plain = start_agent(lab, engine, "--geoip", str(GEOIP_TEST_DB), name="gw-plain")
    wait_until(lambda: runs_newest(lab, "gw-plain", plain), 15, "the plain agent's ack")
    assert seen(plain, "user-app", london)[:2] == ("V1", "PROD")
