"""`本地`, the reference design's city of local callers, is `local`: a caller on this
machine or the private network (whose city resolves to `local`) matches an entry `本地`,
in the gray policy and in a lane, in the matcher and in the rules the engines read."""

from routing_engine import GRAY, PROD, CallerResolver, GrayMatcher
from routing_engine.lanes import normalize_lane
from routing_engine.portable import decision_rules

LOCAL_LANE = normalize_lane(
    {"priority": 100, "match": {"cities": [" 本地 "]}, "members": {"user-app": "V3"}}
)


def city_of(ip: str) -> str | None:
    return CallerResolver("").resolve(ip)[1]


def test_a_loopback_or_private_caller_matches_the_policys_本地(policy):
    matcher = GrayMatcher(policy(enabled=True, cities=["本地"]))
    for ip in ("127.0.0.1", "192.168.7.7", "::1"):
        decision = matcher.decide({}, ip=ip, city=city_of(ip))
        assert (decision.flag, decision.matched) == (GRAY, "city"), ip
    assert matcher.decide({"x-city": "本地"}).flag == GRAY  # a trusted proxy's own word
    assert matcher.decide({}, ip="81.2.69.142", city=city_of("81.2.69.142")).flag == PROD


def test_a_lanes_本地_takes_local_callers_in_the_engines_rules_too(policy):
    gray = policy(enabled=True)
    lanes = {"local-lane": LOCAL_LANE}
    decision = GrayMatcher(gray, {}, lanes).decide({}, ip="127.0.0.1", city=city_of("127.0.0.1"))
    assert (decision.flag, decision.lane, decision.matched) == (GRAY, "local-lane", "city")
    rules = decision_rules(gray, {}, lanes)
    assert rules["cities"]["local"] == rules["cities"]["本地"] != []
