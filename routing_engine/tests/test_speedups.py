"""The C primitives (routing_engine/_speedups.c) against the pure Python ones on requests
a generator of well-formed traffic would not make: odd addresses, spaces and non-ASCII in
cities, lone surrogates and non-text in users, duplicate header spellings."""

import itertools

import pytest

from routing_engine import DEFAULT_POLICY, GrayMatcher, matcher, normalize_policy
from routing_engine.lanes import normalize_lane
from testing.speedups import compiled_or_skip

POLICY = normalize_policy(
    {
        **DEFAULT_POLICY,
        "enabled": True,
        "header": {"name": "Gray", "value": "x"},
        "ips": ["10.0.0.0/8", "::ffff:192.168.0.0/112", "2001:db8::/32", "1.2.3.4"],
        "cities": [" Linköping ", "PARIS", "straße"],
        "users": ["u1", "jürgen", "\ud800x"],
        "percent": 30,
    }
)
LANES = {
    "l1": normalize_lane(
        {
            "priority": 1,
            "match": {"header": {"name": "x-lane", "value": "l1"}, "users": ["u2"], "percent": 5},
            "members": {"svc": {"version": "V2", "percent": 50}},
        }
    )
}
SERVICES = {"svc": {"percent": 100, "targeted": False}}
IPS = [None, "10.1.2.3", "10.1.2.3\x00", "::ffff:192.168.3.4", "::ffff:10.0.0.1", "2001:db8::1",
       "fe80::1", "1.2.3.4", "1.2.3.04", "01.2.3.4", "256.1.1.1", "1.2.3", "", " 1.2.3.4",
       b"10.1.2.3", 5, "\ud800", "１.2.3.4", "::", "1.2.3.4/32"]  # fmt: skip
CITIES = [None, "", " paris ", "PARIS", "Paris\t", "linköping", " LINKÖPING\n", "STRASSE", "straße",
          "\x1cparis\x1f", "par is", "\ud800"]  # fmt: skip
# Text only: a city or user that is not text is the caller's error, which the gray lane alone
# in pure Python may not reach (it stops at the first rule that matches).
USERS = [None, "", "u1", "u2", "jürgen", "\ud800x", "\ud800", "x" * 100, "用户"]


def _built(compiled, lanes):
    previous = matcher.speedups
    matcher.speedups = compiled_or_skip() if compiled else None
    try:
        return GrayMatcher(POLICY, SERVICES, lanes)
    finally:
        matcher.speedups = previous


def _answer(decide, *args, **kwargs):
    try:
        return decide(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001 - the same error either way is the same answer
        return type(exc).__name__


@pytest.mark.parametrize("lanes", [{}, LANES], ids=["gray-only", "lanes"])
def test_odd_requests_are_decided_the_same_in_c_and_in_pure_python(lanes):
    compiled, pure = _built(True, lanes), _built(False, lanes)
    pairs = [(compiled.decide, pure.decide), (compiled.for_service("svc"), pure.for_service("svc"))]
    for ip, city, user in itertools.product(IPS, CITIES, USERS):
        given = {"x-city": city, "x-user-no": user}
        headers = [{}, {"gray": "x"}, {"x-lane": "l1"}, {k: v for k, v in given.items() if v}]
        for ours, theirs in pairs:
            for request in headers:
                for kwargs in ({"city": city, "user": user}, {}):
                    expected = _answer(theirs, request, ip, **kwargs)
                    assert _answer(ours, request, ip, **kwargs) == expected, (ip, city, user)


def test_header_spellings_are_picked_the_same_in_c_and_in_pure_python():
    compiled, pure = _built(True, {}), _built(False, {})
    for headers in ({"GRAY": "1", "gray": "2"}, {"X-City": "a", "x-city": "b", "X-CITY": "c"},
                    {}, {"Gray": 1}, {"Gray": []}, None, {1: "x"}):  # fmt: skip
        for _ in range(2):  # the second time from the spellings each remembers
            expected = _answer(pure.pick_headers, headers)
            assert _answer(compiled.pick_headers, headers) == expected, headers
