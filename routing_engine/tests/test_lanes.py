"""Lanes in the engine: validation, the bucket order of a lane, and the one-pass decision over
every lane checked against a plain pass per lane, lane by lane, over generated requests."""

import ipaddress
import random
import zlib

import pytest

from routing_engine import DEFAULT_POLICY, GRAY, PROD, Decision, GrayMatcher, normalize_policy
from routing_engine.lanes import (
    BUCKETS,
    GRAY_LANE,
    lane_order,
    lane_rank,
    merge_lane_patch,
    normalize_lane,
    read_lanes,
)
from routing_engine.policy import PolicyError

# Every test here on the C primitives and on the pure Python fallback (conftest.engine).
pytestmark = pytest.mark.usefixtures("engine")

POLICY = normalize_policy(
    {
        **DEFAULT_POLICY,
        "enabled": True,
        "routing": True,
        "header": {"name": "gray", "value": "gray-996"},
        "ips": ["10.1.0.0/16"],
        "cities": ["local"],
        "users": ["1001"],
    }
)
FEATURE_X = normalize_lane(
    {
        "priority": 100,
        "match": {"header": {"name": "x-lane", "value": "feature-x"}, "users": ["2001"]},
        "members": {"user-app": "V3", "order-app": {"version": "V3", "percent": 5}},
    }
)


def test_a_member_written_as_a_version_is_stored_as_the_object_form():
    assert FEATURE_X["members"]["user-app"] == {"version": "V3", "percent": 0, "targeted": True}
    assert FEATURE_X["enabled"] is True
    assert FEATURE_X["match"]["ips"] == [] and FEATURE_X["match"]["percent"] == 0


@pytest.mark.parametrize(
    ("lane", "field"),
    [
        ({}, "priority"),
        ({"priority": -1}, "priority"),
        ({"priority": True}, "priority"),
        ({"priority": 1, "colour": "x"}, "colour"),
        ({"priority": 1, "match": {"ips": ["10.1.2.3/16"]}}, "match.ips"),
        ({"priority": 1, "match": {"percent": 0.001}}, "match.percent"),
        ({"priority": 1, "match": {"percent": 101}}, "match.percent"),
        ({"priority": 1, "match": {"header": {"name": "x lane", "value": "y"}}},
         "match.header.name"),
        ({"priority": 1, "match": {"when": 1}}, "match.when"),
        ({"priority": 1, "members": {"user-app": ""}}, "members.user-app.version"),
        ({"priority": 1, "members": {"user-app": {"version": "V3", "percent": 1.005}}},
         "members.user-app.percent"),
        ({"priority": 1, "members": {"user-app": {"version": "V3", "targeted": "yes"}}},
         "members.user-app.targeted"),
        ({"priority": 1, "members": {"user app": "V3"}}, "members"),
        ({"priority": 1, "members": ["user-app"]}, "members"),
    ],
)  # fmt: skip
def test_bad_lanes_name_the_field(lane, field):
    with pytest.raises(PolicyError) as caught:
        normalize_lane(lane)
    assert field in caught.value.errors, caught.value.errors


def test_percent_takes_two_decimals_and_whole_values_stay_integers():
    lane = normalize_lane({"priority": 1, "match": {"percent": 0.25}, "members": {"a": {
        "version": "V2", "percent": 5.0}}})  # fmt: skip
    assert lane["match"]["percent"] == 0.25
    assert lane["members"]["a"]["percent"] == 5 and type(lane["members"]["a"]["percent"]) is int


def test_a_patch_merges_match_and_members_and_null_removes_a_member():
    patched = normalize_lane(
        merge_lane_patch(
            FEATURE_X,
            {"match": {"header": {"value": "fx"}}, "members": {"user-app": None, "pay": "V9"}},
        )
    )
    assert patched["match"]["header"] == {"name": "x-lane", "value": "fx"}
    assert patched["match"]["users"] == ["2001"]
    assert set(patched["members"]) == {"order-app", "pay"}


def test_lanes_are_tried_by_priority_then_name_and_disabled_ones_not_at_all():
    lanes = {"b": {"priority": 5}, "a": {"priority": 5}, "off": {"priority": 1, "enabled": False}}
    assert lane_order(lanes, 1000) == ["a", "b", GRAY_LANE]
    assert lane_order(lanes, 0) == [GRAY_LANE, "a", "b"]


def test_the_gray_lanes_bucket_order_is_the_buckets_own_and_other_lanes_differ():
    assert lane_rank(GRAY_LANE)[:5] == (0, 1, 2, 3, 4)
    feature, other = lane_rank("feature-x"), lane_rank("feature-y")
    assert sorted(feature) == list(range(BUCKETS))
    first = {bucket for bucket in range(BUCKETS) if feature[bucket] < 500}
    second = {bucket for bucket in range(BUCKETS) if other[bucket] < 500}
    # Two lanes at 5 % each take mostly other users (about 5 % of 5 % in common).
    assert len(first) == len(second) == 500
    assert len(first & second) < 60


def test_a_lane_s_percent_is_sticky_and_monotonic():
    users = [f"user-{n}" for n in range(20000)]
    lanes = {"canary": normalize_lane({"priority": 1, "match": {"percent": 0.5}})}
    wider = {"canary": normalize_lane({"priority": 1, "match": {"percent": 6}})}
    small = GrayMatcher(POLICY, {}, lanes).decide
    large = GrayMatcher(POLICY, {}, wider).decide
    in_small = {user for user in users if small({}, user=user).lane == "canary"}
    in_large = {user for user in users if large({}, user=user).lane == "canary"}
    assert in_small <= in_large
    assert 50 <= len(in_small) <= 150  # 0.5 % of 20,000
    assert 1000 <= len(in_large) <= 1400


def test_without_other_lanes_the_decision_is_the_gray_policy_s():
    with_lanes = GrayMatcher(POLICY, {}, {"off": {**FEATURE_X, "enabled": False}})
    assert with_lanes.decide({"gray": "gray-996"}) == Decision(GRAY, "header")
    assert with_lanes.decide({"gray": "gray-996"}).lane == GRAY_LANE


def test_a_lane_before_gray_takes_its_requests_and_gray_keeps_the_rest():
    matcher = GrayMatcher(POLICY, {}, {"feature-x": FEATURE_X})
    decide = matcher.for_service("user-app")
    assert decide({"x-lane": "feature-x"}) == Decision(GRAY, "header", "feature-x")
    assert decide({"gray": "gray-996"}) == Decision(GRAY, "header", GRAY_LANE)
    assert decide({}, user="2001") == Decision(GRAY, "user", "feature-x")
    assert decide({}, user="1001") == Decision(GRAY, "user", GRAY_LANE)
    assert decide({}, user="3001") == Decision(PROD, None)
    after_gray = GrayMatcher(POLICY, {}, {"feature-x": FEATURE_X}, gray_priority=1)
    both = {"x-lane": "feature-x", "gray": "gray-996"}
    assert after_gray.decide(both).lane == GRAY_LANE
    assert matcher.decide(both).lane == "feature-x"


def test_an_untargeted_member_leaves_its_lane_s_match_out_where_requests_enter_there():
    lane = normalize_lane(
        {**FEATURE_X, "members": {"user-app": {"version": "V3", "targeted": False}}}
    )
    matcher = GrayMatcher(POLICY, {}, {"feature-x": lane})
    assert matcher.for_service("user-app")({"x-lane": "feature-x"}) == Decision(PROD, None)
    assert matcher.for_service("order-app")({"x-lane": "feature-x"}).lane == "feature-x"


def test_read_lanes_keeps_the_good_lanes_and_names_the_bad_ones():
    raw = [
        {"name": "feature-x", **FEATURE_X},
        {"name": "Bad Name", "priority": 1},
        {"name": "gray", "priority": 1},
        {"name": "broken", "priority": "high"},
        "not a lane",
    ]
    lanes, gray_priority, skipped = read_lanes(raw, 7)
    assert list(lanes) == ["feature-x"] and gray_priority == 7
    assert [entry.record for entry in skipped] == [
        "lanes[1]", "lanes[gray]", "lanes[broken]", "lanes[4]"
    ]  # fmt: skip
    assert read_lanes({"feature-x": {}})[2][0].record == "lanes"
    assert read_lanes(None, "first")[1:] == (1000, read_lanes(None, "first")[2])


# -- the one-pass decision against a plain pass per lane --------------------------------------


def _in_networks(ip, entries):
    try:
        address = ipaddress.ip_address(ip)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
        address = address.ipv4_mapped
    return any(address in ipaddress.ip_network(entry) for entry in entries)


def _bucket(user, salt=b""):
    return zlib.crc32(salt + user.encode()) % BUCKETS


def _plain(policy, services, lanes, gray_priority, service, headers, ip, city, user):
    """The decision as the contract words it, lane after lane."""
    user = user if user is not None else headers.get(policy["user_header"].lower())
    city = city if city is not None else headers.get(policy["city_header"].lower())
    for name in lane_order(lanes, gray_priority):
        if name == GRAY_LANE:
            match = policy
            override = services.get(service, {})
            targeted = override.get("targeted") is not False
            own = override.get("percent")
            lane_percent = policy["percent"] if own is None else 0
            member_percent, rank = own or 0, lane_rank(GRAY_LANE)
        else:
            match = lanes[name]["match"]
            member = lanes[name]["members"].get(service)
            targeted = member is None or member["targeted"]
            lane_percent = match["percent"] if targeted else 0
            member_percent, rank = (member or {}).get("percent", 0), lane_rank(name)
        header = match["header"]
        if targeted:
            if header["name"] and headers.get(header["name"].lower()) == header["value"]:
                return Decision(GRAY, "header", name)
            if ip is not None and _in_networks(ip, match["ips"]):
                return Decision(GRAY, "ip", name)
            if city is not None and city.strip().casefold() in {
                c.casefold() for c in match["cities"]
            }:
                return Decision(GRAY, "city", name)
            if user and user in match["users"]:
                return Decision(GRAY, "user", name)
        threshold = round(lane_percent * 100)
        if threshold and (threshold == BUCKETS or (user and rank[_bucket(user)] < threshold)):
            return Decision(GRAY, "percent", name)
        threshold = round(member_percent * 100)
        salt = service.encode() + b"\0"
        if threshold and (threshold == BUCKETS or (user and rank[_bucket(user, salt)] < threshold)):
            return Decision(GRAY, "percent", name)
    return Decision(PROD, None)


SERVICES = ["user-app", "order-app", "pay-app"]
NETWORKS = ["10.1.0.0/16", "10.1.2.0/24", "192.168.0.0/24", "2001:db8::/32", "10.2.3.4",
            "2001:db8:1::/48", "172.16.0.0/12", "0.0.0.0/1"]  # fmt: skip
CITIES = ["local", "Paris", "Straße", "東京"]
HEADERS = [("x-lane", "a"), ("x-lane", "b"), ("x-team", "qa"), ("gray", "gray-996")]


def _random_match(rng):
    name, value = rng.choice([*HEADERS, ("", "")])
    return {
        "header": {"name": name, "value": value},
        "ips": rng.sample(NETWORKS, rng.randint(0, 2)),
        "cities": rng.sample(CITIES, rng.randint(0, 1)),
        "users": [str(rng.randint(1, 40)) for _ in range(rng.randint(0, 3))],
        "percent": rng.choice([0, 0, 0.5, 5, 33.33, 100]),
    }


def _random_document(rng):
    policy = normalize_policy({**POLICY, **_random_match(rng), "percent": rng.choice([0, 10])})
    services = {}
    for service in rng.sample(SERVICES, rng.randint(0, 2)):
        services[service] = rng.choice(
            [{"percent": rng.choice([0, 2.5, 50])}, {"targeted": False}, {"percent": 0,
             "targeted": False}, {"percent": 30, "targeted": True}]
        )  # fmt: skip
    lanes = {}
    for index in range(rng.randint(1, 5)):
        members = {
            service: {"version": "V3", "percent": rng.choice([0, 0, 7.5]),
                      "targeted": rng.random() < 0.8}
            for service in rng.sample(SERVICES, rng.randint(0, 3))
        }  # fmt: skip
        lanes[f"lane-{index}"] = normalize_lane(
            {"priority": rng.choice([1, 50, 1000, 2000]), "enabled": rng.random() < 0.9,
             "match": _random_match(rng), "members": members}
        )  # fmt: skip
    return policy, services, lanes, rng.choice([1000, 1, 50])


def _random_request(rng):
    headers = dict(rng.sample(HEADERS, rng.randint(0, 2)))
    ip = rng.choice([None, "10.1.2.3", "10.1.9.9", "192.168.0.7", "2001:db8::1",
                     "::ffff:10.1.2.3", "8.8.8.8", "200.1.1.1", "2001:db8:1::5", "not-an-ip",
                     "172.20.1.1"])  # fmt: skip
    city = rng.choice([None, "LOCAL", " paris ", "strasse", "東京", "Berlin"])
    user = rng.choice([None, "", str(rng.randint(1, 40)), f"u{rng.randint(1, 10**6)}"])
    return headers, ip, city, user


def test_the_one_pass_decision_agrees_with_a_pass_per_lane():
    rng = random.Random(20261202)
    compared = 0
    for _ in range(150):
        policy, services, lanes, gray_priority = _random_document(rng)
        matcher = GrayMatcher(policy, services, lanes, gray_priority)
        for _ in range(100):
            service = rng.choice(SERVICES)
            headers, ip, city, user = _random_request(rng)
            expected = _plain(policy, services, lanes, gray_priority, service, headers, ip,
                              city, user)  # fmt: skip
            got = matcher.for_service(service)(headers, ip=ip, city=city, user=user)
            assert got == expected, (policy, services, lanes, service, headers, ip, city, user)
            compared += 1
    assert compared == 15_000
