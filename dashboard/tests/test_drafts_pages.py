"""The drafts pages: an editor's change of a protected service says where its draft waits;
the draft's page shows its author, base revision and diff; another operator approves it
(a revision) or rejects it; its author, a policy that moved on and a freeze window are
refused on the page, the draft staying pending; viewers read only."""

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from audit.models import AuditEntry
from dashboard.tests.test_policy_editor import form_data
from policy.models import Freeze, PolicyDraft, Revision
from policy.publishing import load_state
from policy.services import set_service_versions
from registry_sync.models import Instance, Service

pytestmark = pytest.mark.django_db


def logged_in(make_user, username: str, role: str) -> Client:
    client = Client()
    client.force_login(make_user(username, role))
    return client


@pytest.fixture
def olga(make_user):
    return logged_in(make_user, "olga", "operator")


@pytest.fixture
def anna(make_user):
    return logged_in(make_user, "anna", "operator")


@pytest.fixture
def draft(olga):
    """olga's policy edit (gray users 1001) of protected user-app, kept as a draft."""
    service = Service.objects.create(name="user-app", protected=True)
    for index, version in enumerate(("V1", "V2")):  # the default prod and gray versions
        Instance.objects.create(service=service, instance_id=f"user-app-{version}",
                                host=f"10.0.{index}.1", port=7201, version=version,
                                state="UP")  # fmt: skip
    olga.post("/policy/", form_data(load_state(), users="1001", comment="beta", action="save"))
    return PolicyDraft.objects.get()


def test_the_editor_says_where_the_draft_waits(olga, draft):
    page = olga.get("/policy/").content.decode()
    assert (
        f"Saved as draft {draft.pk}, waiting for another operator's approval: it changes "
        "protected services (user-app)." in page
    )
    assert f'<a href="/drafts/{draft.pk}/">See draft {draft.pk}</a>' in page


def test_the_draft_is_listed_and_shown_with_its_diff(make_user, draft):
    vera = logged_in(make_user, "vera", "viewer")
    listed = vera.get("/drafts/").content.decode()
    assert 'id="pending-drafts"' in listed and f'data-draft-id="{draft.pk}"' in listed
    assert 'href="/drafts/"' in listed  # the navigation
    response = vera.get(f"/drafts/{draft.pk}/")
    assert response.context["diff"] == [{"field": "gray.users", "added": ["1001"], "removed": []}]
    page = response.content.decode()
    assert '<b id="draft-author">olga</b>' in page
    assert 'href="/revisions/1/">revision 1</a>' in page and "beta" in page
    assert "approve-draft" not in page  # a viewer reads only
    assert vera.post(f"/drafts/{draft.pk}/approve/").status_code == 403
    assert PolicyDraft.objects.get().state == "pending"


def test_another_operator_approves_it_into_a_revision(anna, draft):
    assert 'id="approve-draft"' in anna.get(f"/drafts/{draft.pk}/").content.decode()
    response = anna.post(f"/drafts/{draft.pk}/approve/", {"reason": "looks right"}, follow=True)
    assert response.redirect_chain == [("/revisions/2/", 302)]
    assert f"Draft {draft.pk} approved: published revision 2." in response.content.decode()
    revision = Revision.objects.get(number=2)
    assert (revision.author, revision.source) == ("anna", "ui")
    assert revision.config["gray"]["users"] == ["1001"]
    draft.refresh_from_db()
    assert (draft.state, draft.decided_by, draft.reason) == ("approved", "anna", "looks right")
    entry = AuditEntry.objects.get(action="draft.approve")
    assert (entry.actor, entry.source) == ("anna", "ui")
    assert f'data-draft-id="{draft.pk}"' in anna.get("/drafts/").content.decode()


def test_its_author_cannot_approve_it(olga, draft):
    response = olga.post(f"/drafts/{draft.pk}/approve/", follow=True)
    assert f"Draft {draft.pk} is yours: another operator approves it." in (
        response.content.decode()
    )
    assert PolicyDraft.objects.get().state == "pending"
    assert load_state().revision == 1


def test_a_policy_that_moved_on_is_an_error_and_the_draft_stays_pending(anna, draft):
    Service.objects.create(name="order-app")  # not protected: bob's change is published
    set_service_versions("order-app", {"gray_version": "V7"}, actor="bob", source="api")
    page = anna.get(f"/drafts/{draft.pk}/").content.decode()
    assert 'id="draft-stale"' in page
    response = anna.post(f"/drafts/{draft.pk}/approve/", follow=True)
    assert "The live policy moved on since draft" in response.content.decode()
    assert PolicyDraft.objects.get().state == "pending"
    assert load_state().revision == 2


def test_a_freeze_window_refuses_the_approval(anna, draft):
    now = timezone.now()
    Freeze.objects.create(starts_at=now - timedelta(minutes=1), ends_at=now + timedelta(hours=1),
                          reason="Black Friday")  # fmt: skip
    response = anna.post(f"/drafts/{draft.pk}/approve/", follow=True)
    page = response.content.decode()
    assert "user-app is frozen by freeze window" in page and "Black Friday" in page
    assert PolicyDraft.objects.get().state == "pending"
    assert load_state().revision == 1


def test_another_operator_rejects_it(anna, draft):
    response = anna.post(f"/drafts/{draft.pk}/reject/", {"reason": "not now"}, follow=True)
    assert f"Draft {draft.pk} rejected" in response.content.decode()
    draft.refresh_from_db()
    assert (draft.state, draft.decided_by, draft.reason) == ("rejected", "anna", "not now")
    assert load_state().revision == 1
    page = anna.get(f"/drafts/{draft.pk}/").content.decode()
    assert "Rejected by <b>anna</b>" in page and "approve-draft" not in page
    again = anna.post(f"/drafts/{draft.pk}/approve/", follow=True)
    assert f"Draft {draft.pk} was rejected by anna already." in again.content.decode()
