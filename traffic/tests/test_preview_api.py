"""POST /api/v1/policy/preview/: what a draft would do to the sampled requests."""

from collections import Counter

import pytest

from audit.models import AuditEntry
from policy.models import Revision
from registry_sync.models import Instance, Service
from traffic import store as store_module
from traffic.tests.conftest import PREVIEW_LIVE

pytestmark = pytest.mark.django_db

LIVE = PREVIEW_LIVE
# The draft: two more users, an office CIDR, and a city nobody comes from.
DRAFT = {**LIVE, "users": ["1001", "u1", "u2"], "ips": ["10.1.0.0/16"], "cities": ["Paris"]}


@pytest.fixture
def fleet(api):
    operator = api("operator")
    assert operator.put("/api/v1/policy/", LIVE, format="json").status_code == 200
    service = Service.objects.create(name="user-app")
    for host, version in [("10.0.0.1", "V1"), ("10.0.0.2", "V2"), ("10.0.0.3", "V3")]:
        Instance.objects.create(
            service=service, instance_id=host, host=host, port=7201, version=version, state="UP"
        )
    return operator


@pytest.fixture
def traffic(samples):
    """100 requests: 10 of the user in gray now, 10 of u1 and u2 the draft adds, 20 from
    the office the draft adds, 60 of other users (one each)."""
    samples.add(10, user="1001")
    samples.add(5, user="u1", ip="192.0.2.2")
    samples.add(5, user="u2", ip="192.0.2.3")
    samples.add(20, user="u3", ip="10.1.2.3")
    for n in range(4, 64):
        samples.add(1, user=f"u{n}")
    return samples


def matched(body: dict) -> dict[tuple[str, str, object], int]:
    return {(r["lane"], r["rule"], r["value"]): r["matched"] for r in body["rules"]}


def test_a_policy_draft_answers_shares_now_and_under_it_what_moves_and_each_rule(
    fleet, traffic, api
):
    response = api("viewer").post("/api/v1/policy/preview/", {"policy": DRAFT}, format="json")
    assert response.status_code == 200, response.json()
    body = response.json()
    assert (body["window_s"], body["samples"]) == (900, 100)
    assert body["services"] == {
        "user-app": {
            "requests": 100,
            "now": {"V1": 0.9, "V2": 0.1},
            "draft": {"V1": 0.6, "V2": 0.4},
            "moved": 0.3,
            "users_moved": 3,
        }
    }
    assert matched(body) == {
        ("gray", "header", "x-gray: on"): 0,
        ("gray", "ip", "10.1.0.0/16"): 20,
        ("gray", "city", "Paris"): 0,
        ("gray", "user", "1001"): 10,
        ("gray", "user", "u1"): 5,
        ("gray", "user", "u2"): 5,
    }


def test_a_lane_draft_moves_its_users_to_its_version(fleet, traffic, api):
    lane = {
        "name": "beta",
        "priority": 10,
        "match": {"users": ["u4", "u5"]},
        "members": {"user-app": "V3"},
    }
    body = api("viewer").post("/api/v1/policy/preview/", {"lanes": [lane]}, format="json").json()
    assert body["services"]["user-app"]["draft"] == {"V1": 0.88, "V2": 0.1, "V3": 0.02}
    assert body["services"]["user-app"]["users_moved"] == 2
    assert matched(body)[("beta", "user", "u4")] == 1
    # The live policy's rules are there too, the lane's tried first.
    assert [r["lane"] for r in body["rules"]][:2] == ["beta", "beta"]
    assert matched(body)[("gray", "user", "1001")] == 10


def test_a_lane_matching_a_city_and_a_percent_counts_each(fleet, traffic, api):
    lane = {"name": "beta", "priority": 10, "match": {"cities": ["BERLIN", "Paris"],
            "percent": 100}, "members": {"user-app": "V3"}}  # fmt: skip
    body = api("viewer").post("/api/v1/policy/preview/", {"lanes": [lane]}, format="json").json()
    rules = matched(body)
    assert rules[("beta", "city", "BERLIN")] == 100  # cities are case-insensitive
    assert rules[("beta", "city", "Paris")] == 0
    assert rules[("beta", "percent", 100)] == 100
    assert body["services"]["user-app"]["draft"] == {"V3": 1.0}


def test_bad_drafts_are_400_with_field_messages(fleet, traffic, api):
    viewer = api("viewer")
    bad_policy = viewer.post(
        "/api/v1/policy/preview/", {"policy": {**DRAFT, "percent": 101}}, format="json"
    )
    assert bad_policy.status_code == 400
    assert list(bad_policy.json()) == ["policy.percent"]
    bad_lane = viewer.post(
        "/api/v1/policy/preview/",
        {"lanes": [{"name": "beta", "priority": -1, "match": {"ips": ["10.0.0.300"]}}]},
        format="json",
    )
    assert bad_lane.status_code == 400
    assert set(bad_lane.json()) == {"lanes.beta.priority", "lanes.beta.match.ips"}
    nothing = viewer.post("/api/v1/policy/preview/", {"comment": "hm"}, format="json")
    assert nothing.status_code == 400
    assert "non_field_errors" in nothing.json()


def test_viewers_may_ask_and_nobody_without_credentials(fleet, traffic, api, client):
    anonymous = client.post(
        "/api/v1/policy/preview/", {"policy": DRAFT}, content_type="application/json"
    )
    assert anonymous.status_code == 401
    viewer = api("viewer")
    answer = viewer.post("/api/v1/policy/preview/", {"policy": DRAFT}, format="json")
    assert answer.status_code == 200


def test_a_preview_changes_nothing(fleet, traffic, api):
    revisions, audited = Revision.objects.count(), AuditEntry.objects.count()
    before = fleet.get("/api/v1/lanes/").json()
    lane = {"name": "beta", "priority": 10, "match": {"users": ["u4"]}}
    viewer = api("viewer")
    answer = viewer.post(
        "/api/v1/policy/preview/", {"policy": DRAFT, "lanes": [lane]}, format="json"
    )
    assert answer.status_code == 200
    assert (Revision.objects.count(), AuditEntry.objects.count()) == (revisions, audited)
    assert fleet.get("/api/v1/lanes/").json() == before
    assert fleet.get("/api/v1/policy/").json()["users"] == ["1001"]


def test_no_samples_no_services(fleet, samples, api):
    body = api("viewer").post("/api/v1/policy/preview/", {"policy": DRAFT}, format="json").json()
    assert (body["samples"], body["services"]) == (0, {})
    assert all(rule["matched"] == 0 for rule in body["rules"])


def test_the_prediction_is_what_the_engine_decides_once_the_draft_is_published(fleet, traffic, api):
    """The same samples, decided one by one by the simulator after a real publish, split as
    the preview said (exactly: the same samples, no sampling error between the two)."""
    viewer = api("viewer")
    traffic.add(7, user=None, ip="10.1.9.9", city=None, headers={"x-gray": "on"})
    traffic.add(3, service="order-app", user="u1")
    predicted = viewer.post("/api/v1/policy/preview/", {"policy": DRAFT}, format="json").json()
    assert fleet.put("/api/v1/policy/", DRAFT, format="json").status_code == 200
    split: dict[str, Counter] = {}
    for sample in store_module.store().window():
        answer = viewer.post(
            "/api/v1/simulate/",
            {
                "service": sample.service,
                "ip": sample.ip,
                "user": sample.user,
                "city": sample.city,
                "headers": sample.headers,
            },  # fmt: skip
            format="json",
        ).json()
        split.setdefault(sample.service, Counter())[answer["version"] or "*"] += 1
    assert {
        service: {version: round(n / sum(c.values()), 6) for version, n in sorted(c.items())}
        for service, c in split.items()
    } == {service: body["draft"] for service, body in predicted["services"].items()}
    # No instance of order-app at all: gray falls back to prod, as a gateway would.
    assert predicted["services"]["order-app"]["draft"] == {"V1": 1.0}
