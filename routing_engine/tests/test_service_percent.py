"""Per-service sticky percentages (a release's steps): one salted hash per service, so a
user in gray at 5 % stays in gray at 25 %, and each service's release samples its own users."""

import pytest

from routing_engine import (
    GRAY,
    PROD,
    Decision,
    GrayMatcher,
    PolicyError,
    normalize_service_routing,
    service_bucket,
    user_bucket,
)

# Every test here on the C primitives and on the pure Python fallback (conftest.engine).
pytestmark = pytest.mark.usefixtures("engine")

USERS = [str(n) for n in range(100_000)]


def gray_users(decide, users=USERS):
    return {user for user in users if decide({}, user=user).flag == GRAY}


def test_nobody_leaves_gray_when_the_percent_grows_over_100k_users(policy):
    base = policy(enabled=True)
    previous: set[str] = set()
    for percent in (0, 1, 5, 25, 50, 75, 99, 100):
        decide = GrayMatcher(base, {"user-app": {"percent": percent}}).for_service("user-app")
        now = gray_users(decide)
        assert previous <= now, f"{len(previous - now)} users left gray at {percent} %"
        assert abs(len(now) / len(USERS) - percent / 100) <= 0.01
        previous = now
    assert previous == set(USERS)


def test_each_service_samples_its_own_users(policy):
    matcher = GrayMatcher(
        policy(enabled=True), {"user-app": {"percent": 10}, "order-app": {"percent": 10}}
    )
    users = gray_users(matcher.for_service("user-app"))
    orders = gray_users(matcher.for_service("order-app"))
    # Independent 10 % samples overlap in about 1 % of users, not in all 10 %.
    assert 0.005 < len(users & orders) / len(USERS) < 0.015
    assert all(0 <= service_bucket("user-app", u) < 10_000 for u in USERS[:1000])


def test_the_policy_wide_percent_is_unchanged_and_other_services_keep_it(policy):
    base = policy(enabled=True, percent=30)
    matcher = GrayMatcher(base, {"user-app": {"percent": 5}})
    plain = GrayMatcher(base)
    sample = USERS[:20_000]
    assert gray_users(matcher.for_service("order-app"), sample) == gray_users(plain.decide, sample)
    assert gray_users(matcher.decide, sample) == {u for u in sample if user_bucket(u) < 3000}
    assert len(gray_users(matcher.for_service("user-app"), sample)) < 0.07 * len(sample)


def test_untargeted_service_ignores_the_targeted_rules(policy):
    base = policy(
        enabled=True, header={"name": "gray", "value": "yes"}, users=["1001"], ips=["10.0.0.0/8"]
    )
    matcher = GrayMatcher(base, {"user-app": {"percent": 0, "targeted": False}})
    for_app = matcher.for_service("user-app")
    assert for_app({"gray": "yes"}, ip="10.1.1.1", user="1001") == Decision(PROD, None)
    assert matcher.for_service("order-app")({"gray": "yes"}) == Decision(GRAY, "header")
    # Targeted (the first step of a release): the lists only, no percent.
    first_step = GrayMatcher(base, {"user-app": {"percent": 0, "targeted": True}})
    assert first_step.for_service("user-app")({}, user="1001") == Decision(GRAY, "user")
    assert first_step.for_service("user-app")({}, user="1002") == Decision(PROD, None)


def test_hundred_percent_takes_requests_without_a_user(policy):
    decide = GrayMatcher(policy(enabled=True), {"a": {"percent": 100}}).for_service("a")
    assert decide({}) == Decision(GRAY, "percent")


def test_service_routing_is_validated():
    assert normalize_service_routing({"percent": 25.0, "targeted": False}) == {
        "percent": 25,
        "targeted": False,
    }
    assert normalize_service_routing({"percent": None}) == {}
    with pytest.raises(PolicyError) as caught:
        normalize_service_routing({"percent": 101, "targeted": "no"})
    assert set(caught.value.errors) == {"percent", "targeted"}
