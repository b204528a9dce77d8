"""Protected services (contract "Release outcomes and control"): a policy or lane change of
one waits as a draft; another operator approves it (the revision is made then) or rejects it."""

from datetime import timedelta

import pytest
from django.utils import timezone

from audit.models import AuditEntry
from policy.models import Freeze, PolicyDraft, Revision
from policy.publishing import load_state
from registry_sync.models import Instance, Service

pytestmark = pytest.mark.django_db


@pytest.fixture
def fleet(api):
    setup = api("operator", "setup")
    body = {"enabled": True, "routing": True, "users": ["1001"]}
    assert setup.patch("/api/v1/policy/", body, format="json").status_code == 200
    for name in ("user-app", "pay-app"):
        service = Service.objects.create(name=name)
        for index, version in enumerate(("V1", "V2")):
            Instance.objects.create(service=service, instance_id=f"{name}-{version}",
                                    host=f"10.0.{index}.1", port=7201, version=version,
                                    state="UP")  # fmt: skip


@pytest.fixture
def protected(api, fleet):
    """user-app protected by an admin."""
    admin = api("admin", "ada")
    answer = admin.patch("/api/v1/services/user-app/", {"protected": True}, format="json")
    assert answer.status_code == 200 and answer.json()["protected"] is True
    return admin


@pytest.fixture
def alice(api):
    return api("operator", "alice")


@pytest.fixture
def bob(api):
    return api("operator", "bob")


def users(client):
    return client.get("/api/v1/policy/").json()["users"]


def test_only_an_admin_protects_a_service(api, fleet):
    operator = api("operator")
    answer = operator.patch("/api/v1/services/user-app/", {"protected": True}, format="json")
    assert answer.status_code == 403
    assert not Service.objects.get(name="user-app").protected
    admin = api("admin")
    answer = admin.patch("/api/v1/services/user-app/", {"protected": "yes"}, format="json")
    assert answer.status_code == 400 and "protected" in answer.json()
    assert (
        admin.patch("/api/v1/services/user-app/", {"protected": True}, format="json").status_code
        == 200
    )
    entry = AuditEntry.objects.get(action="service.protect")
    assert (entry.before, entry.after) == ({"protected": False}, {"protected": True})


def test_a_publish_waits_as_a_draft_and_another_operator_approves_it(api, protected, alice, bob):
    revision = load_state().revision
    body = {"users": ["1001", "2002"], "comment": "beta testers"}
    answer = alice.patch("/api/v1/policy/", body, format="json")
    assert answer.status_code == 202
    draft = answer.json()["draft"]
    assert load_state().revision == revision and users(alice) == ["1001"]

    viewer = api("viewer")
    listed = viewer.get("/api/v1/policy/drafts/").json()["results"]
    assert [(d["id"], d["state"], d["author"]) for d in listed] == [(draft, "pending", "alice")]
    shown = viewer.get(f"/api/v1/policy/drafts/{draft}/").json()
    assert shown["base_revision"] == revision and shown["services"] == ["user-app"]
    assert {"field": "gray.users", "added": ["2002"], "removed": []} in shown["diff"]

    assert alice.post(f"/api/v1/policy/drafts/{draft}/approve/").status_code == 403
    assert viewer.post(f"/api/v1/policy/drafts/{draft}/approve/").status_code == 403
    approved = bob.post(f"/api/v1/policy/drafts/{draft}/approve/", {"reason": "ok"})
    assert approved.status_code == 200, approved.json()
    assert approved.json()["state"] == "approved" and approved.json()["decided_by"] == "bob"
    made = Revision.objects.get(number=revision + 1)
    assert made.author == "bob"
    assert made.comment == f"Draft {draft} by alice, approved by bob: beta testers"
    assert users(alice) == ["1001", "2002"]
    assert AuditEntry.objects.filter(action="policy.update", actor="bob").exists()
    assert AuditEntry.objects.get(action="draft.approve").actor == "bob"
    assert bob.post(f"/api/v1/policy/drafts/{draft}/approve/").status_code == 409


def test_a_second_draft_rejected_by_a_third_operator(api, protected, alice, bob):
    revision = load_state().revision
    lane = {"name": "feature-x", "priority": 100,
            "match": {"header": {"name": "x-lane", "value": "x"}},
            "members": {"user-app": "V2"}}  # fmt: skip
    answer = alice.post("/api/v1/lanes/", lane, format="json")
    assert answer.status_code == 202
    draft = answer.json()["draft"]
    carol = api("operator", "carol")
    rejected = carol.post(f"/api/v1/policy/drafts/{draft}/reject/", {"reason": "not now"})
    assert rejected.status_code == 200
    assert (rejected.json()["state"], rejected.json()["reason"]) == ("rejected", "not now")
    assert load_state().revision == revision
    assert alice.get("/api/v1/lanes/feature-x/").status_code == 404
    assert bob.post(f"/api/v1/policy/drafts/{draft}/approve/").status_code == 409
    assert AuditEntry.objects.get(action="draft.reject").actor == "carol"
    assert bob.get("/api/v1/policy/drafts/?state=pending").json()["count"] == 0
    assert bob.get("/api/v1/policy/drafts/?state=rejected").json()["count"] == 1


def test_approving_after_the_policy_moved_on_is_409_and_the_draft_stays(protected, alice, bob):
    draft = alice.patch("/api/v1/policy/", {"users": ["7"]}, format="json").json()["draft"]
    # pay-app is not protected: its change is published at once.
    assert bob.patch("/api/v1/services/pay-app/", {"percent": 5}, format="json").status_code == 200
    answer = bob.post(f"/api/v1/policy/drafts/{draft}/approve/")
    assert answer.status_code == 409 and "moved on" in answer.json()["detail"]
    assert PolicyDraft.objects.get(pk=draft).state == "pending"
    assert users(bob) == ["1001"]


def test_a_freeze_holds_an_approval_too(protected, alice, bob):
    draft = alice.patch("/api/v1/policy/", {"users": ["7"]}, format="json").json()["draft"]
    now = timezone.now()
    Freeze.objects.create(starts_at=now - timedelta(minutes=1), ends_at=now + timedelta(hours=1),
                          services=["user-app"], reason="quarter close")  # fmt: skip
    answer = bob.post(f"/api/v1/policy/drafts/{draft}/approve/")
    assert answer.status_code == 409 and "quarter close" in answer.json()["detail"]
    assert PolicyDraft.objects.get(pk=draft).state == "pending"
    override = {"freeze_override": "agreed with finance"}
    answer = protected.post(f"/api/v1/policy/drafts/{draft}/approve/", override, format="json")
    assert answer.status_code == 200 and users(bob) == ["7"]
