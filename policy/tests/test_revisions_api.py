import pytest

from audit.models import AuditEntry
from policy.models import PolicyState, Revision

pytestmark = pytest.mark.django_db


def publish_steps(client):
    client.patch("/api/v1/policy/", {"enabled": True, "users": ["1001"]}, format="json")
    client.patch("/api/v1/policy/", {"ips": ["10.0.0.0/8"], "percent": 20}, format="json")
    client.patch("/api/v1/policy/", {"users": ["2002", "2003"]}, format="json")


def test_revisions_are_listed_newest_first_with_checksums(api):
    client = api("operator", "alice")
    publish_steps(client)
    results = client.get("/api/v1/revisions/").json()["results"]
    assert [r["revision"] for r in results] == [4, 3, 2, 1]
    assert set(results[0]) == {"revision", "checksum", "created_at", "author", "comment", "source"}
    assert results[0]["author"] == "alice" and len(results[0]["checksum"]) == 64


def test_revision_detail_has_config_and_diff_against_the_previous(api):
    client = api("operator")
    publish_steps(client)
    detail = client.get("/api/v1/revisions/4/").json()
    assert detail["config"]["gray"]["users"] == ["2002", "2003"]
    users_change = next(c for c in detail["diff"] if c["field"] == "gray.users")
    assert users_change["added"] == ["2002", "2003"] and users_change["removed"] == ["1001"]
    assert all(not c["field"].startswith("gray.ips") for c in detail["diff"])


def test_rollback_publishes_the_old_content_byte_for_byte(api):
    client = api("operator", "bob")
    publish_steps(client)
    target = Revision.objects.get(number=2)
    response = client.post("/api/v1/revisions/2/rollback/", {"comment": "bad users"}, format="json")
    assert response.status_code == 201, response.json()
    new = Revision.objects.get(number=response.json()["revision"])
    assert new.number == 5 and new.source == "rollback" and new.rolled_back_from == 2
    assert new.content == target.content
    assert new.checksum == target.checksum
    assert PolicyState.objects.get().content == target.content
    assert client.get("/api/v1/policy/").json()["users"] == ["1001"]
    entry = AuditEntry.objects.first()
    assert (entry.action, entry.actor, entry.source) == ("revision.rollback", "bob", "rollback")


def test_rollback_honours_if_match(api):
    client = api("operator")
    publish_steps(client)
    response = client.post("/api/v1/revisions/2/rollback/", {}, format="json", HTTP_IF_MATCH='"3"')
    assert response.status_code == 412
    assert Revision.objects.count() == 4


def test_rollback_to_the_live_content_changes_nothing(api):
    client = api("operator")
    publish_steps(client)
    response = client.post("/api/v1/revisions/4/rollback/", {}, format="json")
    assert response.status_code == 200
    assert Revision.objects.count() == 4


def test_rollback_of_a_missing_revision_is_404(api):
    assert (
        api("operator").post("/api/v1/revisions/99/rollback/", {}, format="json").status_code == 404
    )


def test_revisions_cannot_be_rewritten():
    from policy.publishing import load_state

    load_state()
    revision = Revision.objects.get(number=1)
    revision.comment = "tampered"
    with pytest.raises(ValueError):
        revision.save()


def test_audit_is_append_only_and_filterable(api):
    alice, bob = api("operator", "alice"), api("operator", "bob")
    alice.patch("/api/v1/policy/", {"percent": 1}, format="json")
    bob.patch("/api/v1/policy/", {"percent": 2}, format="json")
    entries = alice.get("/api/v1/audit/").json()["results"]
    assert [e["actor"] for e in entries] == ["bob", "alice"]
    assert set(entries[0]) >= {"at", "actor", "source", "action", "object", "before", "after"}
    assert entries[0]["before"]["percent"] == 1 and entries[0]["after"]["percent"] == 2
    only_alice = alice.get("/api/v1/audit/?actor=alice").json()["results"]
    assert [e["actor"] for e in only_alice] == ["alice"]
    assert alice.get("/api/v1/audit/?action=revision.rollback").json()["count"] == 0
    since = entries[0]["at"]
    assert [
        e["actor"] for e in alice.get("/api/v1/audit/", {"since": since}).json()["results"]
    ] == ["bob"]
    entry = AuditEntry.objects.first()
    with pytest.raises(ValueError):
        entry.delete()
    with pytest.raises(ValueError):
        entry.save()


def test_audit_since_accepts_any_offset_python_does(api):
    client = api("viewer")
    response = client.get("/api/v1/audit/", {"since": "1168-06-05T11:09:47+23:19"})
    assert response.status_code == 200
    assert client.get("/api/v1/audit/", {"since": "yesterday"}).status_code == 400
