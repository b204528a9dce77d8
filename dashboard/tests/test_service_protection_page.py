"""The protected flag on the service page: everyone sees it, an admin sets or lifts it
(audited, as the API's PATCH), and then a change from the page waits as a draft."""

import pytest
from django.test import Client

from audit.models import AuditEntry
from policy.models import PolicyDraft
from policy.publishing import load_state
from registry_sync.models import Service

pytestmark = pytest.mark.django_db


def logged_in(make_user, username: str, role: str) -> Client:
    client = Client()
    client.force_login(make_user(username, role))
    return client


def test_an_admin_protects_a_service_and_its_changes_wait_as_drafts(make_user):
    Service.objects.create(name="order-app")
    ada = logged_in(make_user, "ada", "admin")
    page = ada.get("/services/order-app/").content.decode()
    assert 'id="protected">not protected</span>' in page and 'id="protect-button"' in page

    response = ada.post("/services/order-app/protection/", {"protected": "true"}, follow=True)
    page = response.content.decode()
    assert "order-app is protected" in page
    assert "protected</span> Changes need another operator's approval" in page
    assert Service.objects.get().protected
    entry = AuditEntry.objects.get(action="service.protect")
    assert (entry.actor, entry.source, entry.after) == ("ada", "ui", {"protected": True})

    saved = ada.post("/services/order-app/", {"gray_version": "V7"}, follow=True)
    draft = PolicyDraft.objects.get()
    assert f'<a href="/drafts/{draft.pk}/">See draft {draft.pk}</a>' in saved.content.decode()
    assert load_state().document["services"] == {}

    ada.post("/services/order-app/protection/", {"protected": "false"})
    assert not Service.objects.get().protected
    assert AuditEntry.objects.filter(action="service.protect").count() == 2


def test_an_operator_sees_the_flag_but_cannot_change_it(make_user):
    Service.objects.create(name="order-app", protected=True)
    olga = logged_in(make_user, "olga", "operator")
    page = olga.get("/services/order-app/").content.decode()
    assert 'id="protected">protected</span>' in page and "protect-button" not in page
    response = olga.post("/services/order-app/protection/", {"protected": "false"})
    assert response.status_code == 403
    assert Service.objects.get().protected
    assert not AuditEntry.objects.exists()
