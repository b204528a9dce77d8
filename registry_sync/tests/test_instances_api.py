import pytest
from django.test import TestCase

from audit.models import AuditEntry
from registry_sync.models import Instance, Registry
from registry_sync.signals import routable_instances_changed
from registry_sync.sync import sync_registry
from testing.fakes.nacos_fake import FakeNacos

pytestmark = pytest.mark.django_db


@pytest.fixture
def nacos():
    with FakeNacos() as fake:
        fake.add_instance("user-app", "10.0.0.1", 7201, metadata={"version": "V1"})
        fake.add_instance("user-app", "10.0.0.2", 7201, metadata={"version": "V2"})
        registry = Registry.objects.create(name="nacos", kind="nacos", base_url=fake.url)
        sync_registry(registry)
        yield fake


def test_offline_drains_tells_the_registry_and_gateways_at_once(api, nacos):
    row = Instance.objects.get(host="10.0.0.2")
    heard = []

    def listener(**kw):
        heard.append(kw["services"])

    routable_instances_changed.connect(listener)
    try:
        with TestCase.captureOnCommitCallbacks(execute=True):
            response = api("operator", "olga").post(f"/api/v1/instances/{row.pk}/offline/")
    finally:
        routable_instances_changed.disconnect(listener)
    assert response.status_code == 202
    assert response.json()["state"] == "DRAINING"
    assert heard == [["user-app"]]
    assert nacos.instance("user-app", "10.0.0.2", 7201).enabled is False
    entry = AuditEntry.objects.get(action="instance.offline")
    assert (entry.actor, entry.source) == ("olga", "api")
    assert entry.before["state"] == "UP" and entry.after["state"] == "DRAINING"


def test_online_puts_it_back(api, nacos, settings):
    settings.DRAIN_SECONDS = 0
    row = Instance.objects.get(host="10.0.0.2")
    client = api("operator")
    assert client.post(f"/api/v1/instances/{row.pk}/offline/").json()["state"] == "OFFLINE"
    response = client.post(f"/api/v1/instances/{row.pk}/online/")
    assert response.status_code == 202 and response.json()["state"] == "UP"
    assert nacos.instance("user-app", "10.0.0.2", 7201).enabled is True
    assert sync_registry(Registry.objects.get(name="nacos")).rows_written == 0


def test_a_failing_registry_keeps_the_intent_and_says_so(api, nacos):
    row = Instance.objects.get(host="10.0.0.1")
    nacos.fail_with(503)
    response = api("operator").post(f"/api/v1/instances/{row.pk}/offline/")
    assert response.status_code == 202
    assert "Registry not updated yet" in response.json()["note"]
    assert Instance.objects.get(pk=row.pk).offline_intent is True
    nacos.fail_with(None)
    sync_registry(
        Registry.objects.get(name="nacos")
    )  # sees it enabled against the intent: re-applies
    assert nacos.instance("user-app", "10.0.0.1", 7201).enabled is False


def test_viewers_cannot_take_instances_offline(api, nacos):
    row = Instance.objects.get(host="10.0.0.1")
    assert api("viewer").post(f"/api/v1/instances/{row.pk}/offline/").status_code == 403
    assert api(None, "anon").post(f"/api/v1/instances/{row.pk}/offline/").status_code == 403
    assert Instance.objects.get(pk=row.pk).state == "UP"


def test_registries_api_is_admin_only_for_writes_and_hides_passwords(api):
    body = {"name": "prod-nacos", "kind": "nacos", "base_url": "http://127.0.0.1:8848/nacos",
            "username": "nacos", "password": "s3cret"}  # fmt: skip
    assert api("operator").post("/api/v1/registries/", body, format="json").status_code == 403
    admin = api("admin")
    created = admin.post("/api/v1/registries/", body, format="json")
    assert created.status_code == 201, created.json()
    assert "password" not in created.json() and created.json()["has_password"] is True
    listed = api("viewer").get("/api/v1/registries/").json()["results"]
    assert all("password" not in r for r in listed)
    assert Registry.objects.get(name="prod-nacos").password == "s3cret"


def test_a_remote_registry_needs_a_url(api):
    response = api("admin").post(
        "/api/v1/registries/", {"name": "x", "kind": "eureka"}, format="json"
    )
    assert response.status_code == 400 and "base_url" in response.json()


def test_the_admin_never_shows_a_registry_password_and_keeps_it_when_left_empty(client, make_user):
    user = make_user("root")
    user.is_staff = user.is_superuser = True
    user.save()
    client.force_login(user)
    registry = Registry.objects.create(
        name="secured", kind="nacos", base_url="http://127.0.0.1:1/nacos", password="s3cret"
    )
    url = f"/admin/registry_sync/registry/{registry.pk}/change/"
    assert b"s3cret" not in client.get(url).content
    form = {"name": "secured", "kind": "nacos", "base_url": registry.base_url,
            "namespace": "public", "group": "DEFAULT_GROUP", "api_version": "auto",
            "username": "", "password": "", "sync_interval": "5.0", "enabled": "on"}  # fmt: skip
    assert client.post(url, form).status_code == 302
    assert Registry.objects.get(pk=registry.pk).password == "s3cret"
