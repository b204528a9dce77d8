"""A Kubernetes registry through the registries API and the admin: its fields, field errors
(nothing saved), the token write-only and encrypted at rest, audited without it."""

import pytest
from django.db import connection

from audit.models import AuditEntry
from registry_sync.models import Registry

pytestmark = pytest.mark.django_db

CLUSTER = {"name": "cluster", "kind": "kubernetes", "base_url": "https://127.0.0.1:6443",
           "namespace": "shop,payments", "token": "sa-token-s3cret"}  # fmt: skip


def test_a_kubernetes_registry_is_created_with_its_defaults_and_a_hidden_token(api):
    admin = api("admin")
    response = admin.post("/api/v1/registries/", CLUSTER, format="json")
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["kind"] == "kubernetes"
    assert body["namespace"] == "shop,payments"
    assert body["version_label"] == "app.kubernetes.io/version"
    assert body["has_token"] is True and "token" not in body
    assert body["kubeconfig"] == ""
    assert "sa-token-s3cret" not in admin.get(f"/api/v1/registries/{body['id']}/").content.decode()

    with connection.cursor() as cursor:
        cursor.execute("SELECT token FROM registry_sync_registry WHERE id = %s", [body["id"]])
        (stored,) = cursor.fetchone()
    assert stored and "sa-token-s3cret" not in stored
    assert Registry.objects.get(pk=body["id"]).token == "sa-token-s3cret"

    patched = admin.patch(
        f"/api/v1/registries/{body['id']}/", {"token": "rotated"}, format="json"
    ).json()
    assert patched["has_token"] is True
    entries = AuditEntry.objects.filter(object="registry cluster").order_by("id")
    assert [e.action for e in entries] == ["registry.create", "registry.update"]
    assert entries[1].after["token_changed"] is True
    assert all("s3cret" not in str(e.after) and "rotated" not in str(e.after) for e in entries)


def test_without_a_namespace_it_reads_kubernetes_default_namespace(api):
    body = {"name": "incluster", "kind": "kubernetes"}
    response = api("admin").post("/api/v1/registries/", body, format="json")
    assert response.status_code == 201, response.json()
    assert response.json()["namespace"] == "default"
    assert response.json()["base_url"] == ""  # the cluster Graylane runs in


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"namespace": "Shop"}, "namespace"),
        ({"namespace": "shop,,payments"}, "namespace"),
        ({"version_label": "-version"}, "version_label"),
        ({"version_label": "example.com/a/b"}, "version_label"),
        ({"base_url": ""}, "base_url"),  # a token needs the API server's URL
        ({"kubeconfig": "/etc/kube/config"}, "kubeconfig"),  # a token and a kubeconfig
        ({"token": "", "kubeconfig": "kube/config"}, "kubeconfig"),
    ],
)
def test_bad_settings_are_field_errors_and_nothing_is_saved(api, change, field):
    response = api("admin").post("/api/v1/registries/", {**CLUSTER, **change}, format="json")
    assert response.status_code == 400
    assert list(response.json()) == [field]
    assert not Registry.objects.filter(kind="kubernetes").exists()


def test_a_kubeconfig_registry_and_a_bad_patch_that_changes_nothing(api):
    admin = api("admin")
    body = {"name": "kc", "kind": "kubernetes", "namespace": "shop",
            "kubeconfig": "/etc/graylane/kubeconfig", "version_label": "release"}  # fmt: skip
    created = admin.post("/api/v1/registries/", body, format="json")
    assert created.status_code == 201, created.json()
    refused = admin.patch(
        f"/api/v1/registries/{created.json()['id']}/", {"namespace": "a b"}, format="json"
    )
    assert refused.status_code == 400 and list(refused.json()) == ["namespace"]
    assert Registry.objects.get(name="kc").namespace == "shop"


def test_the_admin_form_adds_one_and_shows_field_errors(client, make_user):
    user = make_user("root")
    user.is_staff = user.is_superuser = True
    user.save()
    client.force_login(user)
    form = {"name": "cluster", "kind": "kubernetes", "base_url": "", "namespace": "Shop",
            "group": "DEFAULT_GROUP", "api_version": "auto", "username": "", "password": "",
            "version_label": "app.kubernetes.io/version", "token": "", "kubeconfig": "",
            "sync_interval": "5.0", "enabled": "on"}  # fmt: skip
    response = client.post("/admin/registry_sync/registry/add/", form)
    assert response.status_code == 200
    assert "namespace" in response.context["adminform"].form.errors
    assert not Registry.objects.filter(kind="kubernetes").exists()

    response = client.post("/admin/registry_sync/registry/add/", {**form, "namespace": "shop"})
    assert response.status_code == 302
    assert Registry.objects.get(name="cluster").kind == "kubernetes"
