"""Releases in lanes (issue 22): a release's step is its service's member entry in its lane;
two releases of one service run at once in two lanes; rollback quarantines the version
(nothing reaches it: not the simulator, not the gateway document) and leaves the other
release as it was; abort puts back the routing found at the start, exactly; promotion makes
the version prod and puts the lane's member back."""

import pytest

from audit.models import AuditEntry
from gateways.gateway_document import build_document
from policy.models import Revision
from policy.publishing import load_state
from registry_sync.models import Instance, Service
from releases.models import Release

pytestmark = pytest.mark.django_db

ANALYSIS = {"interval_s": 5, "min_requests": 50}
LANE_HEADER = {"x-lane": "feature-x"}
GRAY_HEADER = {"gray": "gray-996"}


@pytest.fixture
def client(api, fleet):
    """user-app V1, V2, V3 and order-app V1, V2; the header rule `gray: gray-996` and user
    1001 in the gray lane; lane `feature-x` (header `x-lane: feature-x`), where order-app
    is V2 for testers."""
    operator = api("operator", "olga")
    Instance.objects.create(
        service=Service.objects.get(name="user-app"),
        instance_id="10.0.0.3#7201#user-app",
        host="10.0.0.3",
        port=7201,
        version="V3",
        state="UP",
        metadata={"version": "V3"},
    )
    header = {"name": "gray", "value": "gray-996"}
    assert operator.patch("/api/v1/policy/", {"header": header}, format="json").status_code == 200
    lane = {
        "name": "feature-x",
        "priority": 100,
        "match": {"header": {"name": "x-lane", "value": "feature-x"}},
        "members": {"order-app": "V2"},
    }
    assert operator.post("/api/v1/lanes/", lane, format="json").status_code == 201
    return operator


def create(client, **fields):
    body = {"service": "user-app", "to_version": "V2", "analysis": ANALYSIS, **fields}
    body.setdefault("steps", [{"targeted": True}, {"percent": 0.5}, {"percent": 100}])
    response = client.post("/api/v1/releases/", body, format="json")
    assert response.status_code == 201, response.json()
    return response.json()


def act(client, release, action):
    return client.post(f"/api/v1/releases/{release['id']}/{action}/")


def simulate(client, **request):
    body = {"service": "user-app", **request}
    return client.post("/api/v1/simulate/", body, format="json").json()


def live():
    return load_state().document


def member(lane, service="user-app"):
    return live().get("lanes", {}).get(lane, {}).get("members", {}).get(service)


def step_override(version, percent):
    return {"gray": version, "percent": percent, "targeted": True}


def document_entry(service="user-app"):
    return build_document(1)["services"][service]


def test_two_releases_in_two_lanes_one_rolled_back_one_aborted(client):
    before = live()["services"].get("user-app")
    entry_before = document_entry()
    canary = create(client)  # V2 in the gray lane
    feature = create(client, to_version="V3", lane="feature-x")
    assert (canary["lane"], feature["lane"]) == ("gray", "feature-x")
    assert act(client, canary, "start").status_code == 200
    assert act(client, feature, "start").status_code == 200
    # Each step is the service's member entry in its release's lane.
    assert live()["services"]["user-app"] == step_override("V2", 0)
    assert member("feature-x") == {"version": "V3", "percent": 0, "targeted": True}
    assert act(client, feature, "promote").json()["step"] == 1
    assert member("feature-x") == {"version": "V3", "percent": 0.5, "targeted": True}
    assert simulate(client, headers=LANE_HEADER)["version"] == "V3"
    assert simulate(client, user="1001")["version"] == "V2"

    revisions = Revision.objects.count()
    rolled_back = act(client, feature, "rollback").json()
    assert rolled_back["state"] == "rolled_back"
    assert Revision.objects.count() == revisions + 1  # routing back and quarantine: one revision
    assert client.get("/api/v1/services/user-app/").json()["quarantined"] == ["V3"]
    assert member("feature-x") is None and member("feature-x", "order-app")["version"] == "V2"
    # Nothing reaches V3: the lane's requests get prod, and no V3 instance is sent.
    answer = simulate(client, headers=LANE_HEADER, path=["user-app", "order-app"])
    assert (answer["flag"], answer["lane"], answer["version"]) == ("GRAY", "feature-x", "V1")
    assert [hop["version"] for hop in answer["hops"]] == ["V1", "V2"]
    entry = document_entry()
    assert entry["quarantined"] == ["V3"]
    assert {instance["version"] for instance in entry["instances"]} == {"V1", "V2"}
    # The other release is as it was.
    assert client.get(f"/api/v1/releases/{canary['id']}/").json()["state"] == "running"
    assert live()["services"]["user-app"] == step_override("V2", 0)
    assert simulate(client, user="1001")["version"] == "V2"

    assert act(client, canary, "abort").json()["state"] == "aborted"
    # Exactly the routing from before the releases (V3's quarantine apart): the header rule
    # and the listed user reach the gray version of user-app again.
    assert live()["services"].get("user-app") == before
    entry = document_entry()
    assert entry.pop("quarantined") == ["V3"]
    unquarantined = [i for i in entry_before["instances"] if i["version"] != "V3"]
    assert entry == {**entry_before, "instances": unquarantined}
    for request in ({"headers": GRAY_HEADER}, {"user": "1001"}):
        answer = simulate(client, **request)
        assert (answer["flag"], answer["version"]) == ("GRAY", "V2"), request
    events = client.get(f"/api/v1/releases/{feature['id']}/events/").json()["results"]
    kinds = [event["kind"] for event in events]
    assert events[0]["detail"]["quarantined"] == "V3"
    assert kinds == ["rolled_back", "advanced", "started", "created"]
    quarantines = AuditEntry.objects.filter(action="service.quarantine", source="release")
    assert [entry.after["quarantined"] for entry in quarantines] == [["V3"]]


def test_abort_puts_back_the_service_s_own_routing_exactly(client):
    client.patch("/api/v1/services/user-app/", {"percent": 30, "targeted": False}, format="json")
    before = live()["services"]["user-app"]
    assert before == {"percent": 30, "targeted": False}
    release = create(client)
    act(client, release, "start")
    assert live()["services"]["user-app"] == step_override("V2", 0)
    act(client, release, "abort")
    assert live()["services"]["user-app"] == before
    assert "quarantined" not in live()


def test_abort_gives_back_the_prod_version_the_release_changed(client):
    release = create(client, to_version="V3", from_version="V2")
    act(client, release, "start")
    assert live()["services"]["user-app"] == step_override("V3", 0) | {"prod": "V2"}
    act(client, release, "abort")
    assert "user-app" not in live()["services"]


def test_abort_leaves_a_prod_version_another_lane_promoted_meanwhile(client):
    canary = create(client, steps=[{"targeted": True}])
    feature = create(client, to_version="V3", lane="feature-x")
    act(client, canary, "start")
    act(client, feature, "start")
    assert act(client, canary, "promote").json()["state"] == "promoted"
    act(client, feature, "abort")
    assert live()["services"]["user-app"] == {"prod": "V2"}
    assert member("feature-x") is None


def test_a_rolled_back_version_gets_no_traffic_until_lifted(client):
    release = create(client)
    act(client, release, "start")
    act(client, release, "rollback")
    for request in ({"headers": GRAY_HEADER}, {"user": "1001"}, {}):
        assert simulate(client, **request)["version"] == "V1", request
    again = create(client)
    refused = act(client, again, "start")
    assert refused.status_code == 409 and "quarantined" in refused.json()["detail"]
    assert client.delete("/api/v1/services/user-app/quarantine/V2/").status_code == 200
    assert simulate(client, user="1001")["version"] == "V2"
    assert act(client, again, "start").status_code == 200


@pytest.mark.parametrize(
    "member_before, member_after",
    [
        (None, None),
        ("V3", None),  # the lane had the new version already: it is prod now
        ("V4", {"version": "V4", "percent": 0, "targeted": True}),
    ],
)
def test_promotion_in_a_lane_makes_the_version_prod_and_puts_the_member_back(
    client, member_before, member_after
):
    if member_before:
        change = {"members": {"user-app": member_before}}
        assert client.patch("/api/v1/lanes/feature-x/", change, format="json").status_code == 200
    release = create(client, to_version="V3", lane="feature-x")
    act(client, release, "start")
    for _ in release["steps"]:
        answer = act(client, release, "promote").json()
    assert answer["state"] == "promoted"
    assert client.get("/api/v1/services/user-app/").json()["prod_version"] == "V3"
    assert live()["services"]["user-app"] == {"prod": "V3"}
    assert member("feature-x") == member_after
    assert member("feature-x", "order-app")["version"] == "V2"
    assert simulate(client)["version"] == "V3"


def test_promotion_in_the_gray_lane_keeps_the_service_s_other_gray_routing(client):
    client.patch("/api/v1/services/user-app/", {"gray_version": "V3"}, format="json")
    release = create(client)
    act(client, release, "start")
    for _ in release["steps"]:
        act(client, release, "promote")
    # V2 is prod; the service's gray version is V3 again, as before the release.
    assert live()["services"]["user-app"] == {"prod": "V2", "gray": "V3"}
    assert simulate(client, user="1001")["version"] == "V3"


def test_one_release_per_service_and_lane(client):
    first = create(client, lane="feature-x")
    second = create(client, lane="feature-x")
    act(client, first, "start")
    refused = act(client, second, "start")
    assert refused.status_code == 409
    assert "in lane feature-x is under way" in refused.json()["detail"]
    # Another lane, but over another prod version: the prod both share would change.
    over_v2 = create(client, to_version="V3", from_version="V2")
    refused = act(client, over_v2, "start")
    assert refused.status_code == 409 and "runs over prod V1" in refused.json()["detail"]
    listed = client.get("/api/v1/releases/?lane=feature-x").json()["results"]
    assert {release["id"] for release in listed} == {first["id"], second["id"]}
    assert client.get("/api/v1/releases/?lane=gray").json()["count"] == 1


def test_a_lane_an_active_release_routes_in_cannot_be_deleted(client):
    no_lane_yet = load_state().revision - 1
    release = create(client, lane="feature-x")
    act(client, release, "start")
    refused = client.delete("/api/v1/lanes/feature-x/")
    assert refused.status_code == 409
    assert f"Release {release['id']} of user-app V2" in refused.json()["detail"]
    revert = client.post(f"/api/v1/revisions/{no_lane_yet}/rollback/", {}, format="json")
    assert revert.status_code == 409 and "feature-x" in revert.json()["detail"]
    assert "feature-x" in live()["lanes"]
    act(client, release, "abort")
    assert client.delete("/api/v1/lanes/feature-x/").status_code == 204


@pytest.mark.parametrize(
    "fields, field",
    [
        ({"lane": "nope"}, "lane"),
        ({"lane": "Not A Lane"}, "lane"),
        ({"steps": [{"percent": 0.125}]}, "steps"),
        ({"steps": [{"percent": "5"}]}, "steps"),
        ({"steps": [{"percent": 0.5}, {"percent": 0.5}]}, "steps"),
        ({"steps": [{"percent": 100.01}]}, "steps"),
    ],
)
def test_bad_input_is_400_and_makes_nothing(client, fields, field):
    body = {"service": "user-app", "to_version": "V2", "steps": [{"targeted": True}], **fields}
    response = client.post("/api/v1/releases/", body, format="json")
    assert response.status_code == 400
    assert field in response.json()
    assert not Release.objects.exists()


def test_fractional_steps_are_kept_to_the_hundredth(client):
    steps = [{"percent": 0.01}, {"percent": 0.5}, {"percent": 2.0}, {"percent": 12.75}]
    release = create(client, steps=steps)
    assert release["steps"] == [
        {"percent": 0.01},
        {"percent": 0.5},
        {"percent": 2},
        {"percent": 12.75},
    ]
    act(client, release, "start")
    assert live()["services"]["user-app"]["percent"] == 0.01
