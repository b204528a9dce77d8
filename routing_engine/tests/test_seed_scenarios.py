"""The three acceptance scenarios of the reference gray-release design, end to end: decision,
then instances (docs/gray-release-design.md)."""

import pytest

from routing_engine import ALL, GRAY, PROD, GrayMatcher, lower_headers, select_instances

# Every test here on the C primitives and on the pure Python fallback (conftest.engine).
pytestmark = pytest.mark.usefixtures("engine")

INSTANCES = [
    {"id": "user-v1", "host": "127.0.0.1", "port": 7201, "version": "V1", "weight": 1.0},
    {"id": "user-v2", "host": "127.0.0.1", "port": 7202, "version": "V2", "weight": 1.0},
]

SEED_GATEWAY = {
    "header": {"name": "gray", "value": "gray-996"},
    "ips": ["127.0.0.1"],
    "cities": ["本地", "local"],
}


def route(policy, headers=None, ip=None):
    decision = GrayMatcher(policy).decide(lower_headers(headers or {}), ip=ip)
    version, instances = select_instances(INSTANCES, decision.flag, "V1", "V2")
    return decision, version, [instance["id"] for instance in instances]


def test_switch_off_reaches_every_version(policy):
    decision, version, ids = route(
        policy(enabled=False, **SEED_GATEWAY), {"gray": "gray-996"}, "127.0.0.1"
    )
    assert (decision.flag, decision.matched) == (ALL, None)
    assert version is None
    assert ids == ["user-v1", "user-v2"]


def test_switch_on_without_a_match_stays_on_prod(policy):
    decision, version, ids = route(
        policy(enabled=True, **SEED_GATEWAY),
        {"gray": "gray-997", "X-City": "Shanghai"},
        "192.168.1.20",
    )
    assert (decision.flag, decision.matched) == (PROD, None)
    assert version == "V1"
    assert ids == ["user-v1"]


@pytest.mark.parametrize(
    ("headers", "ip", "matched"),
    [
        ({"gray": "gray-996"}, "192.168.1.20", "header"),
        ({"Gray": "gray-996"}, None, "header"),
        ({}, "127.0.0.1", "ip"),
        ({"X-City": "local"}, "192.168.1.20", "city"),
        ({"X-City": "本地"}, "192.168.1.20", "city"),
    ],
)
def test_switch_on_with_a_match_goes_to_gray(policy, headers, ip, matched):
    decision, version, ids = route(policy(enabled=True, **SEED_GATEWAY), headers, ip)
    assert (decision.flag, decision.matched) == (GRAY, matched)
    assert version == "V2"
    assert ids == ["user-v2"]
