"""An instance without a usable `version` in its metadata is stored with none (null), unless
its registry's `default_version` names one; the registry's default is set like any of its
fields (API, admin) and applied by the next sync."""

import pytest

from audit.models import AuditEntry
from registry_sync.models import Instance, Registry
from registry_sync.sync import sync_registry
from testing.fakes.nacos_fake import FakeNacos

pytestmark = pytest.mark.django_db

METADATA = {
    "V1": {"version": "V1"},
    "padded": {"version": "  V2 "},
    "missing": {},
    "empty": {"version": ""},
    "blank": {"version": "  "},
    "control": {"version": "V1\x1b[31m"},
    "too long": {"version": "V" * 65},
}


@pytest.fixture
def nacos():
    with FakeNacos() as fake:
        for n, metadata in enumerate(METADATA.values()):
            fake.add_instance("user-app", f"10.0.0.{n + 1}", 7201, metadata=metadata)
        yield fake


def versions() -> dict[str, str | None]:
    by_host = dict(Instance.objects.values_list("host", "version"))
    return {kind: by_host[f"10.0.0.{n + 1}"] for n, kind in enumerate(METADATA)}


def test_no_usable_version_is_stored_as_none_and_the_default_fills_it_in(nacos):
    registry = Registry.objects.create(name="nacos", kind="nacos", base_url=nacos.url)
    sync_registry(registry)
    assert versions() == {
        "V1": "V1",
        "padded": "V2",
        "missing": None,
        "empty": None,
        "blank": None,
        "control": None,
        "too long": None,
    }
    registry.default_version = "V1"
    registry.save()
    summary = sync_registry(registry)
    assert summary.changed == 5
    assert versions() == {
        "V1": "V1",
        "padded": "V2",
        **{kind: "V1" for kind in ("missing", "empty", "blank", "control", "too long")},
    }
    assert "user-app" in summary.routable_changed  # a new generation for the gateways
    registry.default_version = ""
    registry.save()
    sync_registry(registry)
    assert versions()["missing"] is None


def test_the_default_version_is_set_through_the_api_audited_and_checked(api):
    client = api("admin", "ada")
    created = client.post(
        "/api/v1/registries/",
        {"name": "eureka", "kind": "eureka", "base_url": "http://127.0.0.1:8761/eureka"},
        format="json",
    )
    assert created.status_code == 201, created.json()
    assert created.json()["default_version"] == ""
    url = f"/api/v1/registries/{created.json()['id']}/"
    for bad in ("V1\x01", "V" * 65):
        refused = client.patch(url, {"default_version": bad}, format="json")
        assert refused.status_code == 400
        assert list(refused.json()) == ["default_version"]
    assert Registry.objects.get(name="eureka").default_version == ""
    changed = client.patch(url, {"default_version": " V1 "}, format="json")
    assert changed.json()["default_version"] == "V1"
    entry = AuditEntry.objects.filter(action="registry.update").first()
    assert (entry.before["default_version"], entry.after["default_version"]) == ("", "V1")


def test_the_admin_edits_the_default_version(client, make_user):
    user = make_user("root")
    user.is_staff = user.is_superuser = True
    user.save()
    client.force_login(user)
    registry = Registry.objects.create(name="nacos", kind="embedded")
    form = {"name": "nacos", "kind": "embedded", "base_url": "", "namespace": "public",
            "group": "DEFAULT_GROUP", "api_version": "auto", "username": "", "password": "",
            "sync_interval": "5.0", "enabled": "on", "default_version": "V1\x01"}  # fmt: skip
    path = f"/admin/registry_sync/registry/{registry.pk}/change/"
    refused = client.post(path, form)
    assert refused.status_code == 200
    assert "default_version" in refused.context["adminform"].form.errors
    form["default_version"] = "V1"
    assert client.post(path, form).status_code == 302
    registry.refresh_from_db()
    assert registry.default_version == "V1"
