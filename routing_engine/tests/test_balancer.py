from collections import Counter

import pytest

from routing_engine import (
    ALL,
    GRAY,
    PROD,
    SmoothWeightedRoundRobin,
    choose_version,
    is_routable,
    select_instances,
)


def instance(name, version, state=None, weight=None):
    found = {"id": name, "host": "10.0.0.1", "port": 80, "version": version}
    if state is not None:
        found["state"] = state
    if weight is not None:
        found["weight"] = weight
    return found


def ids(instances):
    return [found["id"] for found in instances]


MIXED = [
    instance("v1-up", "V1", "UP"),
    instance("v1-draining", "V1", "DRAINING"),
    instance("v2-up", "V2", "UP"),
    instance("v2-starting", "V2", "STARTING"),
    instance("v3-up", "V3", "UP"),
    instance("unversioned", None, "UP"),
]


def test_only_up_or_stateless_instances_are_routable():
    assert is_routable({"version": "V1"})
    assert is_routable({"version": "V1", "state": "UP"})
    for state in ("STARTING", "UNHEALTHY", "DRAINING", "OFFLINE", "DOWN"):
        assert not is_routable({"version": "V1", "state": state})


def test_choose_version():
    assert choose_version(ALL, "V1", "V2") is None
    assert choose_version(PROD, "V1", "V2") == "V1"
    assert choose_version(GRAY, "V1", "V2") == "V2"
    with pytest.raises(ValueError, match="gray"):
        choose_version("gray", "V1", "V2")


def test_all_reaches_every_routable_instance_whatever_its_version():
    assert select_instances(MIXED, ALL, "V1", "V2") == (None, [MIXED[0], MIXED[2], *MIXED[4:]])


def test_prod_and_gray_reach_only_their_version():
    assert ids(select_instances(MIXED, PROD, "V1", "V2")[1]) == ["v1-up"]
    assert ids(select_instances(MIXED, GRAY, "V1", "V2")[1]) == ["v2-up"]
    assert select_instances(MIXED, GRAY, "V1", "V3") == ("V3", [MIXED[4]])


def test_gray_without_routable_gray_instance_falls_back_to_prod():
    instances = [instance("v1", "V1"), instance("v2", "V2", "DRAINING")]
    version, chosen = select_instances(instances, GRAY, "V1", "V2")
    assert (version, ids(chosen)) == ("V1", ["v1"])


def test_gray_without_fallback_gets_nothing():
    instances = [instance("v1", "V1"), instance("v2", "V2", "DRAINING")]
    assert select_instances(instances, GRAY, "V1", "V2", fallback_to_prod=False) == ("V2", [])


def test_prod_never_reaches_a_gray_instance():
    instances = [instance("v1", "V1", "DOWN"), instance("v2", "V2")]
    assert select_instances(instances, PROD, "V1", "V2") == ("V1", [])


def test_round_robin_spreads_by_weight_smoothly():
    a, b, c = instance("a", "V1", weight=5), instance("b", "V1", weight=1), instance("c", "V1")
    balancer = SmoothWeightedRoundRobin()
    picks = [balancer.pick([a, b, c])["id"] for _ in range(7)]
    assert picks == ["a", "a", "b", "a", "c", "a", "a"]  # nginx's sequence for 5, 1, 1
    assert Counter(balancer.pick([a, b, c])["id"] for _ in range(700)) == {
        "a": 500,
        "b": 100,
        "c": 100,
    }


def test_round_robin_skips_weight_zero_and_survives_list_changes():
    balancer = SmoothWeightedRoundRobin()
    assert balancer.pick([]) is None
    assert balancer.pick([instance("off", "V1", weight=0)]) is None
    first = [instance(f"i{n}", "V1") for n in range(3)]
    assert sorted(balancer.pick(first)["id"] for _ in range(3)) == ["i0", "i1", "i2"]
    # Instances come and go; each new list still gets an even share.
    for round_ in range(50):
        current = [instance(f"r{round_}-{n}", "V1", weight=2.0) for n in range(2)]
        assert sorted(balancer.pick(current)["id"] for _ in range(2)) == sorted(ids(current))
