import pytest

from audit.models import AuditEntry
from gateways.gateway_document import build_document
from policy.models import Revision
from policy.publishing import load_state
from registry_sync.models import Instance, Service

pytestmark = pytest.mark.django_db


@pytest.fixture
def user_app():
    load_state()
    service = Service.objects.create(name="user-app")
    for n, (version, state) in enumerate(
        [("V1", "UP"), ("V1", "UP"), ("V2", "UP"), ("V2", "DRAINING")]
    ):
        Instance.objects.create(
            service=service,
            instance_id=f"10.0.0.{n}#7201#DEFAULT#DEFAULT_GROUP@@user-app",
            host=f"10.0.0.{n}",
            port=7201,
            version=version,
            state=state,
            metadata={"version": version},
        )
    return service


def test_services_list_effective_versions_and_instance_counts(api, user_app):
    body = api("viewer").get("/api/v1/services/").json()
    assert body["count"] == 1
    (row,) = body["results"]
    assert row["name"] == "user-app"
    assert (row["prod_version"], row["gray_version"]) == ("V1", "V2")
    assert row["instances"] == {"DRAINING": 1, "UP": 3}


def test_a_service_override_makes_a_revision_and_null_inherits_again(api, user_app):
    client = api("operator", "carol")
    before = Revision.objects.count()
    response = client.patch("/api/v1/services/user-app/", {"gray_version": "V3"}, format="json")
    assert response.status_code == 200, response.json()
    assert (response.json()["prod_version"], response.json()["gray_version"]) == ("V1", "V3")
    assert Revision.objects.count() == before + 1
    assert Revision.objects.first().config["services"] == {"user-app": {"gray": "V3"}}
    entry = AuditEntry.objects.first()
    assert (entry.action, entry.object, entry.actor) == (
        "service.versions",
        "service user-app",
        "carol",
    )
    assert entry.after["override"] == {"gray": "V3"}
    # The policy default still applies to every other service.
    assert client.get("/api/v1/policy/").json()["versions"] == {"prod": "V1", "gray": "V2"}

    response = client.patch("/api/v1/services/user-app/", {"gray_version": None}, format="json")
    assert response.json()["gray_version"] == "V2"
    assert Revision.objects.first().config["services"] == {}


@pytest.mark.parametrize(
    "body,field",
    [
        ({"gray_version": ""}, "gray_version"),
        ({"gray_version": 3}, "gray_version"),
        ({"gray_version": "V1"}, "gray_version"),  # equal to the prod version
        ({"prod_version": "x" * 65}, "prod_version"),
        ({"colour": "blue"}, "colour"),
    ],
)
def test_invalid_version_assignments_are_400_and_change_nothing(api, user_app, body, field):
    client = api("operator")
    revisions = Revision.objects.count()
    response = client.patch("/api/v1/services/user-app/", body, format="json")
    assert response.status_code == 400
    assert field in response.json()
    assert Revision.objects.count() == revisions


def test_a_new_default_that_would_equal_an_override_is_refused(api, user_app):
    client = api("operator")
    client.patch("/api/v1/services/user-app/", {"gray_version": "V3"}, format="json")
    response = client.patch("/api/v1/policy/", {"versions": {"prod": "V3"}}, format="json")
    assert response.status_code == 400
    assert "user-app" in " ".join(response.json()["versions"])


def test_unknown_service_is_404(api):
    client = api("operator")
    assert client.get("/api/v1/services/nope/").status_code == 404
    assert (
        client.patch("/api/v1/services/nope/", {"gray_version": "V3"}, format="json").status_code
        == 404
    )
    assert client.get("/api/v1/services/nope/instances/").status_code == 404


def test_instances_use_the_contract_fields(api, user_app):
    body = api("viewer").get("/api/v1/services/user-app/instances/").json()
    assert body["count"] == 4
    first = body["results"][0]
    assert {
        "id", "instance_id", "host", "port", "version", "state", "healthy", "enabled",
        "weight", "metadata", "last_seen",
    } <= set(first)  # fmt: skip
    assert first["version"] == first["metadata"]["version"]


def test_a_service_percent_is_a_revision_in_the_gateway_document_and_the_simulator(api, user_app):
    client = api("operator")
    client.patch("/api/v1/policy/", {"enabled": True, "routing": True}, format="json")
    response = client.patch(
        "/api/v1/services/user-app/", {"percent": 100, "targeted": False}, format="json"
    )
    assert response.status_code == 200, response.json()
    assert Revision.objects.first().config["services"] == {
        "user-app": {"percent": 100, "targeted": False}
    }
    doc = build_document(1)
    assert doc["services"]["user-app"]["percent"] == 100
    assert doc["services"]["user-app"]["targeted"] is False
    answer = client.post("/api/v1/simulate/", {"service": "user-app", "user": "7"}, format="json")
    assert (answer.json()["flag"], answer.json()["matched"]) == ("GRAY", "percent")
    assert (answer.json()["version"]) == "V2"
    bad = client.patch("/api/v1/services/user-app/", {"percent": 101}, format="json")
    assert bad.status_code == 400 and "percent" in bad.json()
    client.patch("/api/v1/services/user-app/", {"percent": None, "targeted": None}, format="json")
    assert Revision.objects.first().config["services"] == {}


def test_instances_without_a_version_are_counted_and_listed_as_null(api, user_app):
    for n, state in enumerate(["UP", "DOWN"]):
        Instance.objects.create(
            service=user_app, instance_id=f"bare-{n}", host=f"10.0.1.{n}", port=7201, state=state
        )
    client = api("viewer")
    (row,) = client.get("/api/v1/services/").json()["results"]
    assert row["instances"] == {"DOWN": 1, "DRAINING": 1, "UP": 4, "no_version": 2}
    assert client.get("/api/v1/services/user-app/").json()["instances"] == row["instances"]
    listed = client.get("/api/v1/services/user-app/instances/").json()["results"]
    assert {i["instance_id"]: i["version"] for i in listed if i["host"].startswith("10.0.1.")} == {
        "bare-0": None,
        "bare-1": None,
    }
    (bare,) = [
        i for i in build_document(1)["services"]["user-app"]["instances"] if i["id"] == "bare-0"
    ]
    assert bare["version"] is None
