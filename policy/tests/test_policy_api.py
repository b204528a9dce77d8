import pytest

from audit.models import AuditEntry
from policy.models import PolicyState, Revision

pytestmark = pytest.mark.django_db

SEED_POLICY = {
    "enabled": True,
    "routing": True,
    "header": {"name": "gray", "value": "gray-996"},
    "ips": ["127.0.0.1", "10.1.0.0/16"],
    "cities": ["local"],
    "users": ["1001", "1002"],
    "user_header": "X-User-No",
    "city_header": "X-City",
    "percent": 0,
    "versions": {"prod": "V1", "gray": "V2"},
}


def test_get_returns_the_contract_shape_with_an_etag(api):
    response = api("viewer").get("/api/v1/policy/")
    assert response.status_code == 200
    body = response.json()
    assert response["ETag"] == f'"{body["revision"]}"'
    assert set(body) == {
        "revision", "enabled", "routing", "header", "ips", "cities", "users",
        "user_header", "city_header", "percent", "versions", "updated_at", "updated_by",
    }  # fmt: skip
    assert body["versions"] == {"prod": "V1", "gray": "V2"}


def test_put_publishes_a_revision_and_returns_the_new_document(api):
    client = api("operator", "alice")
    before = client.get("/api/v1/policy/").json()["revision"]
    response = client.put("/api/v1/policy/", SEED_POLICY, format="json")
    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["revision"] == before + 1
    assert body["updated_by"] == "alice"
    assert body["ips"] == ["127.0.0.1", "10.1.0.0/16"]
    assert response["ETag"] == f'"{before + 1}"'
    revision = Revision.objects.get(number=before + 1)
    assert revision.author == "alice" and revision.source == "api"
    assert revision.config["gray"]["header"] == {"name": "gray", "value": "gray-996"}
    entry = AuditEntry.objects.first()
    assert (entry.actor, entry.source, entry.action) == ("alice", "api", "policy.update")
    assert entry.before["ips"] == [] and entry.after["ips"] == SEED_POLICY["ips"]
    assert {"added": ["127.0.0.1", "10.1.0.0/16"]}.items() <= next(
        change for change in revision.diff if change["field"] == "gray.ips"
    ).items()


def test_patch_changes_only_the_given_fields_and_normalises(api):
    client = api("operator")
    client.put("/api/v1/policy/", SEED_POLICY, format="json")
    response = client.patch(
        "/api/v1/policy/",
        {"ips": [" 10.0.0.1 ", "10.0.0.1", "2001:DB8:0:0::1", "192.168.0.0/24"]},
        format="json",
    )
    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["ips"] == ["10.0.0.1", "2001:db8::1", "192.168.0.0/24"]
    assert body["users"] == ["1001", "1002"]
    assert body["header"] == {"name": "gray", "value": "gray-996"}


def test_patch_of_a_nested_field_keeps_its_sibling(api):
    client = api("operator")
    client.put("/api/v1/policy/", SEED_POLICY, format="json")
    body = client.patch("/api/v1/policy/", {"versions": {"gray": "V3"}}, format="json").json()
    assert body["versions"] == {"prod": "V1", "gray": "V3"}


def test_a_write_that_changes_nothing_makes_no_revision(api):
    client = api("operator")
    first = client.put("/api/v1/policy/", SEED_POLICY, format="json").json()["revision"]
    again = client.put("/api/v1/policy/", SEED_POLICY, format="json")
    assert again.status_code == 200
    assert again.json()["revision"] == first
    assert Revision.objects.count() == first


INVALID = [
    ("ips", {"ips": ["10.1.2.3/16"]}, "did you mean 10.1.0.0/16"),
    ("ips", {"ips": ["not-an-ip"]}, "not an IP"),
    ("ips", {"ips": "10.0.0.1"}, "list"),
    ("header.name", {"header": {"name": "bad header", "value": "x"}}, "token"),
    ("header.value", {"header": {"name": "gray", "value": ""}}, "Required"),
    ("user_header", {"user_header": "X User"}, "token"),
    ("city_header", {"city_header": ""}, ""),
    ("percent", {"percent": 101}, "between 0 and 100"),
    ("percent", {"percent": "50"}, ""),
    ("enabled", {"enabled": "yes"}, ""),
    ("versions.prod", {"versions": {"prod": "", "gray": "V2"}}, "blank"),
    ("versions", {"versions": {"prod": "V2", "gray": "V2"}}, "different"),
    ("surprise", {"surprise": 1}, "Unknown field"),
]


@pytest.mark.parametrize("field,patch,message", INVALID, ids=[case[0] for case in INVALID])
def test_every_invalid_field_is_a_400_naming_it_and_changes_nothing(api, field, patch, message):
    client = api("operator")
    client.put("/api/v1/policy/", SEED_POLICY, format="json")
    before = PolicyState.objects.get().content
    revisions = Revision.objects.count()
    for method in (client.patch, client.put):
        document = patch if method == client.patch else {**SEED_POLICY, **patch}
        response = method("/api/v1/policy/", document, format="json")
        assert response.status_code == 400, response.json()
        errors = response.json()
        assert field in errors, errors
        assert message in " ".join(errors[field])
    assert PolicyState.objects.get().content == before
    assert Revision.objects.count() == revisions


def test_put_without_a_field_is_rejected(api):
    document = {key: value for key, value in SEED_POLICY.items() if key != "cities"}
    response = api("operator").put("/api/v1/policy/", document, format="json")
    assert response.status_code == 400
    assert "cities" in response.json()


def test_several_errors_are_reported_together(api):
    response = api("operator").patch(
        "/api/v1/policy/", {"ips": ["x"], "percent": -1}, format="json"
    )
    assert response.status_code == 400
    assert {"ips", "percent"} <= set(response.json())


def test_stale_if_match_is_412_with_the_current_document(api):
    client = api("operator")
    etag = client.get("/api/v1/policy/")["ETag"]
    assert client.patch("/api/v1/policy/", {"percent": 5}, format="json", HTTP_IF_MATCH=etag)
    stale = client.patch("/api/v1/policy/", {"percent": 7}, format="json", HTTP_IF_MATCH=etag)
    assert stale.status_code == 412
    assert stale.json()["percent"] == 5
    assert stale.json()["revision"] == int(etag.strip('"')) + 1
    assert client.get("/api/v1/policy/").json()["percent"] == 5


def test_a_matching_if_match_is_accepted(api):
    client = api("operator")
    etag = client.get("/api/v1/policy/")["ETag"]
    response = client.patch("/api/v1/policy/", {"percent": 9}, format="json", HTTP_IF_MATCH=etag)
    assert response.status_code == 200
    assert response["ETag"] != etag


def test_a_malformed_if_match_is_a_400(api):
    response = api("operator").patch(
        "/api/v1/policy/", {"percent": 9}, format="json", HTTP_IF_MATCH="yesterday"
    )
    assert response.status_code == 400
    assert "If-Match" in response.json()


def test_a_document_sent_back_with_its_revision_cannot_overwrite_a_newer_one(api):
    client = api("operator")
    document = client.get("/api/v1/policy/").json()
    client.patch("/api/v1/policy/", {"percent": 30}, format="json")
    document["users"] = ["9"]
    response = client.put("/api/v1/policy/", document, format="json")
    assert response.status_code == 412
    assert client.get("/api/v1/policy/").json()["percent"] == 30
