"""Registry records: no credentials inside `base_url` (API, admin form, model validation),
and every change through the API audited without the password."""

import json

import pytest
from django.core.exceptions import ValidationError
from django.db import connection

from accounts.secret_fields import MAX_PASSWORD_LENGTH
from audit.models import AuditEntry
from registry_sync.models import Registry

pytestmark = pytest.mark.django_db

NACOS = {"name": "prod-nacos", "kind": "nacos", "base_url": "http://127.0.0.1:8848/nacos",
         "username": "nacos", "password": "s3cret-pw"}  # fmt: skip
URLS_WITH_CREDENTIALS = [
    "http://nacos:s3cret-pw@127.0.0.1:8848/nacos",
    "http://nacos@127.0.0.1:8848/nacos",
    "https://nacos:@nacos.internal/",
]


@pytest.mark.parametrize("url", URLS_WITH_CREDENTIALS)
def test_the_api_refuses_credentials_in_the_url(api, url):
    admin = api("admin")
    response = admin.post("/api/v1/registries/", {**NACOS, "base_url": url}, format="json")
    assert response.status_code == 400
    assert list(response.json()) == ["base_url"]
    assert "username/password" in response.json()["base_url"][0]
    assert "s3cret-pw" not in response.content.decode()
    assert not Registry.objects.filter(name="prod-nacos").exists()

    registry = admin.post("/api/v1/registries/", NACOS, format="json").json()
    patched = admin.patch(f"/api/v1/registries/{registry['id']}/", {"base_url": url}, format="json")
    assert patched.status_code == 400 and list(patched.json()) == ["base_url"]
    assert Registry.objects.get(name="prod-nacos").base_url == NACOS["base_url"]


def test_the_model_and_the_admin_form_refuse_credentials_in_the_url(client, make_user):
    registry = Registry(name="r", kind="nacos", base_url=URLS_WITH_CREDENTIALS[0])
    with pytest.raises(ValidationError) as refused:
        registry.full_clean()
    assert list(refused.value.message_dict) == ["base_url"]

    user = make_user("root")
    user.is_staff = user.is_superuser = True
    user.save()
    client.force_login(user)
    form = {"name": "secured", "kind": "nacos", "base_url": URLS_WITH_CREDENTIALS[0],
            "namespace": "public", "group": "DEFAULT_GROUP", "api_version": "auto",
            "username": "", "password": "", "sync_interval": "5.0", "enabled": "on"}  # fmt: skip
    response = client.post("/admin/registry_sync/registry/add/", form)
    assert response.status_code == 200  # the form again, with the error
    assert response.context["adminform"].form.errors["base_url"] == [
        "No credentials in the URL: put them in username/password."
    ]
    assert not Registry.objects.filter(name="secured").exists()


def test_registry_changes_through_the_api_are_audited_without_the_password(api):
    admin = api("admin", username="ada")
    created = admin.post("/api/v1/registries/", NACOS, format="json").json()
    url = f"/api/v1/registries/{created['id']}/"
    assert (
        admin.patch(url, {"sync_interval": 2, "password": "n3w-pw"}, format="json").status_code
        == 200
    )
    assert admin.delete(url).status_code == 204

    entries = list(AuditEntry.objects.order_by("id"))
    assert [(e.actor, e.source, e.action, e.object) for e in entries] == [
        ("ada", "api", "registry.create", "registry prod-nacos"),
        ("ada", "api", "registry.update", "registry prod-nacos"),
        ("ada", "api", "registry.delete", "registry prod-nacos"),
    ]
    create, update, delete = entries
    assert create.before is None and create.after["base_url"] == NACOS["base_url"]
    assert create.after["has_password"] is True and create.after["username"] == "nacos"
    assert (update.before["sync_interval"], update.after["sync_interval"]) == (5.0, 2.0)
    assert update.after["password_changed"] is True
    assert delete.after is None and delete.before["name"] == "prod-nacos"
    stored = json.dumps([[e.before, e.after] for e in entries])
    assert "s3cret-pw" not in stored and "n3w-pw" not in stored


def test_an_older_registry_with_credentials_in_its_url_is_audited_without_them(api):
    registry = Registry.objects.create(name="old", kind="nacos", base_url=URLS_WITH_CREDENTIALS[0])
    response = api("admin").patch(
        f"/api/v1/registries/{registry.pk}/", {"base_url": NACOS["base_url"]}, format="json"
    )
    assert response.status_code == 200
    entry = AuditEntry.objects.get()
    assert entry.before["base_url"] == "http://127.0.0.1:8848/nacos"
    assert "s3cret-pw" not in json.dumps([entry.before, entry.after])


def test_a_password_too_long_is_a_field_error_and_a_long_one_is_kept(api):
    """On PostgreSQL a password longer than its column was a 500 (and on SQLite silently
    kept); now there is one limit, said in a field message, and everything below it fits."""
    admin = api("admin")
    limit = MAX_PASSWORD_LENGTH
    too_long = admin.post(
        "/api/v1/registries/", {**NACOS, "password": "p" * (limit + 1)}, format="json"
    )
    assert too_long.status_code == 400
    assert too_long.json() == {
        "password": [f"Ensure this field has no more than {limit} characters."]
    }
    assert not Registry.objects.filter(name="prod-nacos").exists()

    created = admin.post("/api/v1/registries/", {**NACOS, "password": "p" * limit}, format="json")
    assert created.status_code == 201, created.content
    assert Registry.objects.get(name="prod-nacos").password == "p" * limit
    url = f"/api/v1/registries/{created.json()['id']}/"
    patched = admin.patch(url, {"password": "q" * (limit + 1)}, format="json")
    assert patched.status_code == 400 and list(patched.json()) == ["password"]
    assert Registry.objects.get(name="prod-nacos").password == "p" * limit


CONSUL = {"name": "prod-consul", "kind": "consul", "base_url": "http://127.0.0.1:8500",
          "datacenter": "dc1", "token": "acl-s3cret", "version_key": "release"}  # fmt: skip


def test_a_consul_registry_through_the_api_keeps_its_acl_token_write_only_and_encrypted(api):
    admin = api("admin", username="ada")
    created = admin.post("/api/v1/registries/", CONSUL, format="json")
    assert created.status_code == 201, created.json()
    body = created.json()
    assert (body["kind"], body["datacenter"], body["version_key"]) == ("consul", "dc1", "release")
    assert "token" not in body and body["has_token"] is True
    assert "acl-s3cret" not in created.content.decode()
    listed = admin.get("/api/v1/registries/").content.decode()
    assert "prod-consul" in listed and "acl-s3cret" not in listed
    registry = Registry.objects.get(name="prod-consul")
    assert registry.token == "acl-s3cret"
    with connection.cursor() as cursor:
        cursor.execute("SELECT token FROM registry_sync_registry WHERE id = %s", [registry.pk])
        assert "acl-s3cret" not in cursor.fetchone()[0]
    admin.patch(f"/api/v1/registries/{body['id']}/", {"token": "n3w"}, format="json")
    update = AuditEntry.objects.filter(action="registry.update").get()
    assert update.after["token_changed"] is True and "n3w" not in json.dumps(update.after)
    assert "acl-s3cret" not in json.dumps(AuditEntry.objects.get(action="registry.create").after)


@pytest.mark.parametrize(
    ("field", "value"),
    [("datacenter", "eu west"), ("version_key", "app.version"), ("base_url", "")],
)
def test_a_bad_consul_registry_is_400_with_the_field_and_nothing_is_stored(api, field, value):
    response = api("admin").post("/api/v1/registries/", {**CONSUL, field: value}, format="json")
    assert response.status_code == 400
    assert list(response.json()) == [field]
    assert not Registry.objects.filter(name="prod-consul").exists()


def test_the_admin_form_keeps_the_consul_token_when_left_empty(client, make_user):
    user = make_user("root")
    user.is_staff = user.is_superuser = True
    user.save()
    client.force_login(user)
    form = {"name": "consul", "kind": "consul", "base_url": "http://127.0.0.1:8500",
            "namespace": "", "group": "", "api_version": "auto", "username": "",
            "password": "", "datacenter": "dc1", "token": "acl-s3cret", "version_key": "",
            "sync_interval": "5.0", "enabled": "on"}  # fmt: skip
    assert client.post("/admin/registry_sync/registry/add/", form).status_code == 302
    registry = Registry.objects.get(name="consul")
    page = client.get(f"/admin/registry_sync/registry/{registry.pk}/change/").content.decode()
    assert "acl-s3cret" not in page
    edited = {**form, "token": "", "datacenter": "dc2"}
    path = f"/admin/registry_sync/registry/{registry.pk}/change/"
    assert client.post(path, edited).status_code == 302
    registry.refresh_from_db()
    assert (registry.token, registry.datacenter) == ("acl-s3cret", "dc2")
