"""Webhooks through the API: operators manage their own and see only those, admins all
(including the ones made in the admin, which have no owner); every change audited."""

import pytest

from audit.models import AuditEntry
from releases.models import Webhook

pytestmark = pytest.mark.django_db

HOOK = {"name": "olga-slack", "url": "https://hooks.example.com/T1/B2/secret-path", "kind": "slack"}


def names(client):
    response = client.get("/api/v1/webhooks/")
    assert response.status_code == 200
    return [hook["name"] for hook in response.json()["results"]]


def test_an_operator_manages_her_own_and_is_refused_anothers(api):
    olga, piet = api("operator", "olga"), api("operator", "piet")
    made = olga.post("/api/v1/webhooks/", {**HOOK, "secret": "s3"}, format="json")
    assert made.status_code == 201, made.json()
    body = made.json()
    assert (body["owner"], body["has_secret"], body["enabled"]) == ("olga", True, True)
    assert "secret" not in body
    mine = f"/api/v1/webhooks/{body['id']}/"
    assert (
        piet.post("/api/v1/webhooks/", {**HOOK, "name": "piet-hook"}, format="json").status_code
        == 201
    )

    assert names(olga) == ["olga-slack"]
    assert names(piet) == ["piet-hook"]
    changed = olga.patch(mine, {"enabled": False, "url": "https://hooks.example.com/new"})
    assert changed.status_code == 200, changed.json()
    assert changed.json()["enabled"] is False
    # Another operator's webhook does not exist for piet: not shown, not changed, not deleted.
    assert piet.get(mine).status_code == 404
    assert piet.patch(mine, {"enabled": True}).status_code == 404
    assert piet.delete(mine).status_code == 404
    assert Webhook.objects.get(name="olga-slack").enabled is False
    assert olga.delete(mine).status_code == 204
    assert not Webhook.objects.filter(name="olga-slack").exists()

    audited = AuditEntry.objects.filter(object="webhook olga-slack").order_by("id")
    assert [(e.actor, e.action) for e in audited] == [
        ("olga", "webhook.create"),
        ("olga", "webhook.update"),
        ("olga", "webhook.delete"),
    ]
    update = audited[1]
    assert update.before["enabled"] is True and update.after["enabled"] is False
    assert update.after["url_changed"] is True
    # The URL's path may be its credential: the audit log (viewers read it) has only the host.
    assert "secret-path" not in str(update.before) + str(audited[0].after)


def test_an_admin_sees_and_changes_all_even_those_without_an_owner(api):
    olga = api("operator", "olga")
    olgas = olga.post("/api/v1/webhooks/", HOOK, format="json").json()
    Webhook.objects.create(name="from-the-admin", url="https://hooks.example.com/a")
    admin = api("admin", "ada")
    assert names(admin) == ["from-the-admin", "olga-slack"]
    assert names(olga) == ["olga-slack"]
    answer = admin.patch(f"/api/v1/webhooks/{olgas['id']}/", {"kind": "generic"})
    assert answer.status_code == 200
    assert answer.json()["owner"] == "olga"  # an admin's change does not take it from her
    orphan = Webhook.objects.get(name="from-the-admin")
    assert olga.get(f"/api/v1/webhooks/{orphan.pk}/").status_code == 404
    assert admin.delete(f"/api/v1/webhooks/{orphan.pk}/").status_code == 204


def test_viewers_may_not_and_bad_input_is_a_400(api):
    viewer = api("viewer")
    assert viewer.get("/api/v1/webhooks/").status_code == 403
    assert viewer.post("/api/v1/webhooks/", HOOK, format="json").status_code == 403
    olga = api("operator", "olga")
    bad = olga.post("/api/v1/webhooks/", {**HOOK, "url": "not a url", "kind": "pager"})
    assert bad.status_code == 400
    assert set(bad.json()) == {"url", "kind"}
    refused = olga.post("/api/v1/webhooks/", {**HOOK, "url": "http://169.254.169.254/x"})
    assert refused.status_code == 400
    assert "url" in refused.json()
    assert olga.post("/api/v1/webhooks/", HOOK, format="json").status_code == 201
    taken = olga.post("/api/v1/webhooks/", HOOK, format="json")
    assert taken.status_code == 400 and "name" in taken.json()
