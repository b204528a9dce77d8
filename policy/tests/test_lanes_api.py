"""The lanes API (contract "Lanes"), quarantined versions, and what gateways and the
simulator make of them."""

import pytest

from audit.models import AuditEntry
from gateways.gateway_document import build_document
from policy.publishing import load_state
from policy.services import quarantine_version
from registry_sync.models import Instance, Service

pytestmark = pytest.mark.django_db

SEED = {
    "enabled": True,
    "routing": True,
    "header": {"name": "gray", "value": "gray-996"},
    "users": ["1001"],
}
FEATURE_X = {
    "name": "feature-x",
    "priority": 100,
    "match": {"header": {"name": "x-lane", "value": "feature-x"}},
    "members": {"user-app": "V3", "order-app": {"version": "V3", "percent": 0.5}},
}


@pytest.fixture
def operator(api):
    client = api("operator")
    assert client.patch("/api/v1/policy/", SEED, format="json").status_code == 200
    for name, versions in {"user-app": ("V1", "V2", "V3"), "order-app": ("V1",)}.items():
        service = Service.objects.create(name=name)
        for index, version in enumerate(versions):
            Instance.objects.create(service=service, instance_id=f"{name}-{version}",
                                    host=f"10.0.{index}.1", port=7201, version=version,
                                    state="UP")  # fmt: skip
    return client


def lanes(client):
    return {row["name"]: row for row in client.get("/api/v1/lanes/").json()["results"]}


def test_gray_is_listed_built_in_as_the_policy(operator):
    gray = lanes(operator)["gray"]
    assert gray["builtin"] is True and gray["priority"] == 1000 and gray["enabled"] is True
    assert gray["match"]["header"] == SEED["header"] and gray["match"]["users"] == ["1001"]
    assert gray["members"]["user-app"] == {"version": "V2", "percent": 0, "targeted": True}


def test_a_lane_is_created_as_a_revision_with_its_author_and_an_audit_entry(operator):
    before = load_state().revision
    response = operator.post("/api/v1/lanes/", FEATURE_X, format="json")
    assert response.status_code == 201, response.json()
    body = response.json()
    assert response["ETag"] == f'"{before + 1}"'
    assert body["members"]["user-app"] == {"version": "V3", "percent": 0, "targeted": True}
    assert body["members"]["order-app"]["percent"] == 0.5
    assert body["builtin"] is False and body["updated_by"] == operator.user.username
    assert list(lanes(operator)) == ["feature-x", "gray"]  # tried in that order
    entry = AuditEntry.objects.filter(action="lane.create").get()
    assert entry.after["lane"]["members"]["user-app"]["version"] == "V3"


def test_bad_lanes_answer_every_field_and_change_nothing(operator):
    before = load_state().revision
    response = operator.post(
        "/api/v1/lanes/",
        {"name": "Feature X", "priority": -3, "match": {"percent": 1.234},
         "members": {"user-app": ""}},
        format="json",
    )  # fmt: skip
    assert response.status_code == 400
    assert set(response.json()) == {"name", "priority", "match.percent", "members.user-app.version"}
    assert load_state().revision == before
    for name in ("gray", "feature-x"):
        operator.post("/api/v1/lanes/", {**FEATURE_X, "name": "feature-x"}, format="json")
        again = operator.post("/api/v1/lanes/", {**FEATURE_X, "name": name}, format="json")
        assert again.status_code == 400 and "exists already" in again.json()["name"][0]


def test_edits_honour_if_match_and_a_stale_one_is_412(operator):
    created = operator.post("/api/v1/lanes/", FEATURE_X, format="json")
    stale = operator.patch("/api/v1/lanes/feature-x/", {"priority": 5}, format="json",
                           HTTP_IF_MATCH='"1"')  # fmt: skip
    assert stale.status_code == 412
    assert lanes(operator)["feature-x"]["priority"] == 100
    patched = operator.patch(
        "/api/v1/lanes/feature-x/",
        {"priority": 5, "members": {"user-app": None}},
        format="json",
        HTTP_IF_MATCH=created["ETag"],
    )
    assert patched.status_code == 200, patched.json()
    assert patched.json()["priority"] == 5 and list(patched.json()["members"]) == ["order-app"]
    replaced = operator.put("/api/v1/lanes/feature-x/", {"priority": 7}, format="json")
    assert replaced.json()["members"] == {} and replaced.json()["match"]["header"]["name"] == ""


def test_a_change_that_changes_nothing_is_no_revision(operator):
    operator.post("/api/v1/lanes/", FEATURE_X, format="json")
    revision = load_state().revision
    same = {key: value for key, value in FEATURE_X.items() if key != "name"}
    assert operator.put("/api/v1/lanes/feature-x/", same, format="json").status_code == 200
    assert load_state().revision == revision


def test_delete_a_lane_but_never_gray(operator):
    operator.post("/api/v1/lanes/", FEATURE_X, format="json")
    assert operator.delete("/api/v1/lanes/feature-x/").status_code == 204
    assert operator.delete("/api/v1/lanes/feature-x/").status_code == 404
    refused = operator.delete("/api/v1/lanes/gray/")
    assert refused.status_code == 400 and "cannot be deleted" in refused.json()["name"][0]
    assert list(lanes(operator)) == ["gray"]


def test_editing_the_gray_lane_edits_the_policy_and_the_services_gray_versions(operator):
    response = operator.patch(
        "/api/v1/lanes/gray/",
        {"priority": 10, "match": {"users": ["1001", "1002"]}, "members": {"user-app": "V3"}},
        format="json",
    )
    assert response.status_code == 200, response.json()
    policy = operator.get("/api/v1/policy/").json()
    assert policy["users"] == ["1001", "1002"] and "priority" not in policy
    service = operator.get("/api/v1/services/user-app/").json()
    assert service["gray_version"] == "V3"
    assert lanes(operator)["gray"]["priority"] == 10
    same_as_prod = operator.patch("/api/v1/lanes/gray/", {"members": {"user-app": "V1"}},
                                  format="json")  # fmt: skip
    assert same_as_prod.status_code == 400
    assert "members.user-app.version" in same_as_prod.json()


def test_viewers_read_lanes_and_may_not_write_them(operator, api):
    viewer = api("viewer")
    assert viewer.get("/api/v1/lanes/gray/").status_code == 200
    assert viewer.post("/api/v1/lanes/", FEATURE_X, format="json").status_code == 403
    assert viewer.delete("/api/v1/lanes/gray/").status_code == 403


def test_gateways_get_enabled_lanes_and_a_document_without_lanes_is_as_before(operator):
    plain = build_document(1)
    assert "lanes" not in plain and "gray_priority" not in plain
    operator.post("/api/v1/lanes/", FEATURE_X, format="json")
    operator.post("/api/v1/lanes/", {"name": "off", "priority": 1, "enabled": False},
                  format="json")  # fmt: skip
    document = build_document(2)
    assert [lane["name"] for lane in document["lanes"]] == ["feature-x"]
    assert document["lanes"][0]["members"]["user-app"]["version"] == "V3"
    assert document["gray_priority"] == 1000 and document["checksum"] != plain["checksum"]
    operator.delete("/api/v1/lanes/feature-x/")
    operator.delete("/api/v1/lanes/off/")
    assert build_document(3)["checksum"] == plain["checksum"]


def test_the_simulator_answers_each_hop_with_its_lane_version_or_the_fallback(operator, api):
    operator.post("/api/v1/lanes/", FEATURE_X, format="json")
    body = (
        api("viewer")
        .post(
            "/api/v1/simulate/",
            {"path": ["user-app", "order-app"], "headers": {"X-Lane": "feature-x"}},
            format="json",
        )
        .json()
    )
    assert (body["flag"], body["lane"], body["matched"], body["version"]) == (
        "GRAY", "feature-x", "header", "V3"
    )  # fmt: skip
    assert {i["version"] for i in body["instances"]} == {"V3"}
    assert body["hops"] == [
        {"service": "user-app", "asked": "V3", "version": "V3", "fallback": False,
         "routable": 1, "in_lane": True},
        # order-app has no V3 instance: the lane falls back to its prod version there.
        {"service": "order-app", "asked": "V3", "version": "V1", "fallback": True,
         "routable": 1, "in_lane": True},
    ]  # fmt: skip
    gray = (
        api("viewer", "v2")
        .post(
            "/api/v1/simulate/", {"path": ["user-app", "order-app"], "user": "1001"}, format="json"
        )
        .json()
    )
    assert gray["lane"] == "gray" and [hop["version"] for hop in gray["hops"]] == ["V2", "V1"]


def test_a_quarantined_version_gets_no_traffic_until_lifted(operator, api):
    quarantine_version("user-app", "V2", actor="release-analysis", source="release")
    service = operator.get("/api/v1/services/user-app/").json()
    assert service["quarantined"] == ["V2"]
    document = build_document(5)
    assert document["services"]["user-app"]["quarantined"] == ["V2"]
    assert {i["version"] for i in document["services"]["user-app"]["instances"]} == {"V1", "V3"}
    gray = operator.post("/api/v1/simulate/", {"service": "user-app", "user": "1001"},
                         format="json").json()  # fmt: skip
    assert (gray["flag"], gray["version"]) == ("GRAY", "V1")  # the fallback: V2 takes none
    refused = operator.patch("/api/v1/services/user-app/", {"prod_version": "V2"}, format="json")
    assert refused.status_code == 400 and "quarantined" in refused.json()["prod_version"][0]
    assert api("viewer").delete("/api/v1/services/user-app/quarantine/V2/").status_code == 403
    lifted = operator.delete("/api/v1/services/user-app/quarantine/V2/")
    assert lifted.status_code == 200 and lifted.json()["quarantined"] == []
    assert AuditEntry.objects.filter(action="service.quarantine_lifted").count() == 1
    assert operator.delete("/api/v1/services/user-app/quarantine/V2/").status_code == 404
