"""routing_engine.portable: the rules exported as data decide every request as GrayMatcher
does, when read by the algorithm its docstring gives (written here in plain Python, as
dataplane/agent/decide.lua writes it in Lua)."""

import ipaddress
import random
import zlib
from bisect import bisect_right

import pytest

from routing_engine import DEFAULT_POLICY, GrayMatcher, normalize_policy
from routing_engine.lanes import normalize_lane
from routing_engine.portable import casefold_table, decision_rules, python_space

# Every test here on the C primitives and on the pure Python fallback (conftest.engine).
pytestmark = pytest.mark.usefixtures("engine")

POLICY = normalize_policy(
    {
        **DEFAULT_POLICY,
        "enabled": True,
        "routing": True,
        "header": {"name": "gray", "value": "gray-996"},
        "ips": ["10.0.0.0/8", "1.2.3.4", "2001:db8::/32", "0.0.0.0/1"],
        "cities": ["Beijing", "local"],
        "users": ["1001", "abc"],
        "percent": 12.34,
    }
)
LANES = {
    "feature-x": normalize_lane(
        {
            "priority": 100,
            "match": {
                "header": {"name": "x-lane", "value": "feature-x"},
                "ips": ["10.1.0.0/16", "2001:db8:1::/48"],
                "users": ["1001"],
                "percent": 5,
            },
            "members": {"user-app": {"version": "V3", "percent": 7.5}},
        }
    ),
    "feature-y": normalize_lane(
        {
            "priority": 2000,
            "match": {"cities": ["Shanghai"], "percent": 100},
            "members": {"order-app": {"version": "V3", "targeted": False}},
        }
    ),
}
SERVICES = {"pay-app": {"percent": 33, "targeted": False}}


def decide(rules, service, headers, ip, city, user):
    """(lane, rule kind) or None for PROD, from the exported data alone."""
    own = rules["services"].get(service)
    every = set(range(len(rules["order"])))
    rules_ok = set(own["rules"]) if own else every
    percents_ok = set(own["percents"]) if own else every
    best = [len(rules["order"]), None]

    def consider(places, allowed, kind):
        for place in places:
            if place < best[0] and place in allowed:
                best[:] = [place, kind]

    def taken(place, bucket, threshold):
        if threshold >= 10_000:
            return True  # every request, with a user id or without
        if bucket is None:
            return False
        name = rules["order"][place]
        return (bucket if name == "gray" else rules["ranks"][name][bucket]) < threshold

    for name, values in rules["headers"]:
        for value, places in values:
            if headers.get(name) == value:
                consider(places, rules_ok, "header")
    address = ipaddress.ip_address(ip)
    bounds, sets = rules["v4" if address.version == 4 else "v6"]
    consider(sets[bisect_right(bounds, int(address))], rules_ok, "ip")
    if city is not None:
        consider(rules["cities"].get(city.strip().casefold(), []), rules_ok, "city")
    if user:
        consider(rules["users"].get(user, []), rules_ok, "user")
    bucket = zlib.crc32(user.encode()) % 10_000 if user else None
    for place, threshold in rules["percents"]:
        if place < best[0] and place in percents_ok and taken(place, bucket, threshold):
            best[:] = [place, "percent"]
    if own:
        seed = zlib.crc32(service.encode() + b"\0")
        bucket = zlib.crc32(user.encode(), seed) % 10_000 if user else None
        for place, threshold in own["own"]:
            if place < best[0] and taken(place, bucket, threshold):
                best[:] = [place, "percent"]
    return None if best[1] is None else (rules["order"][best[0]], best[1])


def test_the_exported_rules_decide_as_the_matcher():
    rules = decision_rules(POLICY, SERVICES, LANES, 1000)
    assert rules["order"] == ["feature-x", "gray", "feature-y"]
    matcher = GrayMatcher(POLICY, SERVICES, LANES, 1000)
    draw = random.Random(1)
    ips = ["10.1.2.3", "10.2.3.4", "1.2.3.4", "1.2.3.5", "200.1.1.1", "2001:db8:1::5"]
    ips += ["2001:db8:2::1", "::1", "127.0.0.1", "127.255.255.255", "128.0.0.0", "0.0.0.0"]
    for _ in range(20_000):
        service = draw.choice(["user-app", "order-app", "pay-app", "other"])
        headers = {}
        if draw.random() < 0.2:
            headers["gray"] = draw.choice(["gray-996", "no"])
        if draw.random() < 0.2:
            headers["x-lane"] = draw.choice(["feature-x", "no"])
        ip = draw.choice(ips)
        city = draw.choice([None, "Beijing ", " shanghai", "x"])
        user = draw.choice([None, "", "1001", "abc", str(draw.randint(0, 100_000))])
        decision = matcher.for_service(service)(headers, ip=ip, city=city, user=user)
        expected = None if decision.flag == "PROD" else (decision.lane, decision.matched)
        assert decide(rules, service, headers, ip, city, user) == expected


def test_disabled_is_all_and_says_nothing_else():
    assert decision_rules({**POLICY, "enabled": False}) == {"enabled": False}


def test_casefold_and_strip_go_one_character_at_a_time():
    """What lets decide.lua fold a city through a table of characters."""
    table = casefold_table()
    text = "ΣΑΣ Straße ǅ İ Ｍünchen"
    assert "".join(table.get(char, char) for char in text) == text.casefold()
    assert "\u3000" in python_space() and "\x1c" in python_space()
