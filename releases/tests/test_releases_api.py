"""The releases API: create, the state machine (409s), roles, routing revisions, events."""

import pytest

from audit.models import AuditEntry
from gateways.gateway_document import build_document
from policy.models import Revision
from releases.tests.conftest import STEPS

pytestmark = pytest.mark.django_db

BODY = {
    "service": "user-app",
    "to_version": "V2",
    "steps": STEPS,
    "analysis": {"interval_s": 5, "min_requests": 50},
}


def create(client, **changes):
    return client.post("/api/v1/releases/", {**BODY, **changes}, format="json")


def routing(service="user-app"):
    return build_document(1)["services"][service]


def test_create_answers_the_release_with_defaults(api, fleet):
    response = create(api("operator", "olga"))
    assert response.status_code == 201, response.json()
    body = response.json()
    assert (body["service"], body["from_version"], body["to_version"]) == ("user-app", "V1", "V2")
    assert (body["state"], body["step"], body["created_by"]) == ("pending", 0, "olga")
    assert body["steps"] == STEPS
    assert body["analysis"] == {
        "interval_s": 5,
        "min_requests": 50,
        "max_error_rate_increase": 1.0,
        "failures_tolerated": 1,
        "max_p95_ms": None,
        "deadline_s": 3600,
        "max_p95_increase_ms": None,
        "metrics": [],
    }
    assert body["allowed_actions"] == ["start", "abort"]
    assert AuditEntry.objects.filter(action="release.create").count() == 1


@pytest.mark.parametrize(
    "changes, field",
    [
        ({"service": "nope"}, "service"),
        ({"to_version": "V1"}, "to_version"),
        ({"steps": []}, "steps"),
        ({"steps": [{"percent": 50}, {"percent": 5}]}, "steps"),
        ({"steps": [{"percent": 5}, {"targeted": True}]}, "steps"),
        ({"steps": [{"percent": 0}]}, "steps"),
        ({"steps": [{"colour": "red"}]}, "steps"),
        ({"analysis": {"interval_s": 4}}, "analysis"),
        ({"analysis": {"interval_s": 60, "deadline_s": 30}}, "analysis"),
        ({"analysis": {"max_error_rate_increase": 0}}, "analysis"),
    ],
)
def test_bad_input_is_400_with_the_field_and_nothing_is_made(api, fleet, changes, field):
    response = create(api("operator"), **changes)
    assert response.status_code == 400
    assert field in response.json()
    assert api("viewer").get("/api/v1/releases/").json()["count"] == 0


def test_roles(api, fleet):
    assert create(api("viewer")).status_code == 403
    release = create(api("operator")).json()
    viewer = api("viewer", "vic")
    assert viewer.get(f"/api/v1/releases/{release['id']}/").status_code == 200
    assert viewer.post(f"/api/v1/releases/{release['id']}/start/").status_code == 403
    anonymous = api(None).__class__()
    assert anonymous.get("/api/v1/releases/").status_code == 401


def test_the_state_machine_and_its_routing_revisions(api, fleet):
    client = api("operator", "olga")
    release = create(client).json()
    url = f"/api/v1/releases/{release['id']}"
    for action in ("pause", "resume", "promote", "rollback"):
        response = client.post(f"{url}/{action}/")
        assert response.status_code == 409, action
        assert "pending" in response.json()["detail"]
    revisions = Revision.objects.count()
    started = client.post(f"{url}/start/")
    assert started.status_code == 200
    assert started.json()["state"] == "running"
    assert Revision.objects.count() == revisions + 1
    assert Revision.objects.first().source == "release"
    assert routing() | {"instances": []} == {
        "prod": "V1",
        "gray": "V2",
        "percent": 0,
        "targeted": True,
        "instances": [],
    }
    # The targeted step: user 1001 is gray, others are not (the simulator says so).
    sim = client.post("/api/v1/simulate/", {"service": "user-app", "user": "1001"}, format="json")
    assert sim.json()["version"] == "V2"
    assert client.post(f"{url}/start/").status_code == 409
    assert client.post(f"{url}/resume/").status_code == 409
    assert client.post(f"{url}/pause/").json()["state"] == "paused"
    assert client.post(f"{url}/pause/").status_code == 409
    assert client.post(f"{url}/resume/").json()["state"] == "running"
    promoted = client.post(f"{url}/promote/").json()
    assert (promoted["state"], promoted["step"]) == ("running", 1)
    assert routing()["percent"] == 5
    for _ in range(3):
        client.post(f"{url}/promote/")
    assert routing()["percent"] == 100
    final = client.post(f"{url}/promote/").json()
    assert final["state"] == "promoted"
    # V2 is prod; the service's gray routing is what it was before (none of its own).
    assert routing() | {"instances": []} == {"prod": "V2", "gray": "V2", "instances": []}
    services = client.get("/api/v1/services/user-app/").json()
    assert services["prod_version"] == "V2"
    for action in ("start", "pause", "resume", "promote", "rollback", "abort"):
        assert client.post(f"{url}/{action}/").status_code == 409
    kinds = [e["kind"] for e in client.get(f"{url}/events/").json()["results"]]
    assert kinds == [
        "promoted",
        "advanced",
        "advanced",
        "advanced",
        "advanced",
        "resumed",
        "paused",
        "started",
        "created",
    ]
    actions = set(AuditEntry.objects.values_list("action", flat=True))
    assert {"release.start", "release.pause", "release.promote", "service.versions"} <= actions


def test_rollback_sends_every_request_of_the_service_to_prod(api, fleet):
    client = api("operator")
    release = create(client).json()
    url = f"/api/v1/releases/{release['id']}"
    client.post(f"{url}/start/")
    client.post(f"{url}/promote/")
    assert client.post(f"{url}/rollback/").json()["state"] == "rolled_back"
    # Routing as before the release, and V2 quarantined: no request reaches it.
    doc = routing()
    assert (doc["prod"], doc.get("percent"), doc.get("targeted")) == ("V1", None, None)
    assert doc["quarantined"] == ["V2"]
    for user in ("1001", "7", "8"):
        sim = client.post("/api/v1/simulate/", {"service": "user-app", "user": user}, format="json")
        assert sim.json()["version"] == "V1"


def test_abort_a_pending_release_changes_no_routing(api, fleet):
    client = api("operator")
    release = create(client).json()
    revisions = Revision.objects.count()
    assert client.post(f"/api/v1/releases/{release['id']}/abort/").json()["state"] == "aborted"
    assert Revision.objects.count() == revisions


def test_two_services_at_once_but_one_release_per_service(api, fleet):
    client = api("operator")
    first = create(client).json()
    second = create(client).json()
    other = create(client, service="order-app").json()
    assert client.post(f"/api/v1/releases/{first['id']}/start/").status_code == 200
    assert client.post(f"/api/v1/releases/{other['id']}/start/").status_code == 200
    refused = client.post(f"/api/v1/releases/{second['id']}/start/")
    assert refused.status_code == 409 and "under way" in refused.json()["detail"]
    client.post(f"/api/v1/releases/{other['id']}/promote/")
    assert routing("user-app")["percent"] == 0
    assert routing("order-app")["percent"] == 5
    running = client.get("/api/v1/releases/?state=running").json()
    assert {r["service"] for r in running["results"]} == {"user-app", "order-app"}
    listed = client.get("/api/v1/releases/?service=user-app&state=pending").json()
    assert [r["id"] for r in listed["results"]] == [second["id"]]
    assert client.get("/api/v1/releases/?state=bogus").status_code == 400


def test_start_needs_gray_routing_on(api, fleet):
    client = api("operator")
    client.patch("/api/v1/policy/", {"enabled": False}, format="json")
    release = create(client).json()
    response = client.post(f"/api/v1/releases/{release['id']}/start/")
    assert response.status_code == 409 and "routing is off" in response.json()["detail"]


def test_the_releases_api_is_in_the_openapi_document(api, fleet):
    schema = api("viewer").get("/api/schema/?format=json").json()
    paths = schema["paths"]
    assert "/api/v1/releases/" in paths and "post" in paths["/api/v1/releases/"]
    for action in ("start", "pause", "resume", "promote", "rollback", "abort", "events"):
        assert f"/api/v1/releases/{{id}}/{action}/" in paths
    assert "409" in paths["/api/v1/releases/{id}/start/"]["post"]["responses"]
