"""Where a registry may point (outbound/policy.py): link-local, cloud metadata and
unspecified addresses are refused when the registry is saved (API, admin form) and when the
sync connects; what a failed sync says is detail for admins, and viewers see "unreachable".
The name that resolves elsewhere later: tests/test_outbound_rebinding.py."""

import pytest

import outbound
from registry_sync.models import UNREACHABLE, Instance, Registry
from registry_sync.sync import SyncFailed, sync_registry
from testing.fakes.nacos_fake import FakeNacos
from testing.processes import free_port

pytestmark = pytest.mark.django_db

NACOS = {"name": "prod-nacos", "kind": "nacos", "sync_interval": 5}
REFUSED = {
    "http://169.254.169.254/latest/meta-data/": "169.254.169.254 is a cloud metadata address",
    "http://[fd00:ec2::254]:8848/nacos": "fd00:ec2::254 is a cloud metadata address",
    "http://[::ffff:169.254.169.254]:8848/nacos": "169.254.169.254 is a cloud metadata address",
    "http://169.254.1.1:8848/nacos": "169.254.1.1 is a link-local address",
    "http://[fe80::1]:8848/nacos": "fe80::1 is a link-local address",
    "http://0.0.0.0:8848/nacos": "0.0.0.0 is an unspecified address",
}


@pytest.mark.parametrize("url", REFUSED)
def test_the_api_refuses_a_registry_at_a_refused_address_with_the_reason(api, url):
    admin = api("admin")
    response = admin.post("/api/v1/registries/", {**NACOS, "base_url": url}, format="json")
    assert response.status_code == 400
    [message] = response.json()["base_url"]
    assert message.startswith(REFUSED[url]) and "OUTBOUND_DENIED_NETWORKS" in message
    assert not Registry.objects.filter(name="prod-nacos").exists()

    ok = {**NACOS, "base_url": "http://10.0.0.5:8848/nacos"}
    created = admin.post("/api/v1/registries/", ok, format="json")
    assert created.status_code == 201, created.content
    patched = admin.patch(f"/api/v1/registries/{created.json()['id']}/", {"base_url": url})
    assert patched.status_code == 400 and list(patched.json()) == ["base_url"]
    assert Registry.objects.get(name="prod-nacos").base_url == ok["base_url"]


@pytest.mark.parametrize(
    "url", ["http://127.0.0.1:8848/nacos", "http://localhost:8761/eureka", "http://10.2.3.4/"]
)
def test_loopback_and_private_registries_are_allowed(api, url):
    response = api("admin").post("/api/v1/registries/", {**NACOS, "base_url": url}, format="json")
    assert response.status_code == 201, response.content


def test_the_operator_sets_the_networks(api, settings):
    settings.OUTBOUND_POLICY = outbound.Policy(
        denied=[*outbound.DEFAULT_DENIED, "10.0.0.0/8", "127.0.0.0/8"]
    )
    admin = api("admin")
    for url in ("http://10.0.0.5:8848/nacos", "http://localhost:8848/nacos"):
        response = admin.post("/api/v1/registries/", {**NACOS, "base_url": url}, format="json")
        assert response.status_code == 400, url
        assert "in a denied network" in response.json()["base_url"][0]
    allowed = admin.post(
        "/api/v1/registries/", {**NACOS, "base_url": "http://192.168.0.9/"}, format="json"
    )
    assert allowed.status_code == 201


def test_the_admin_form_refuses_a_metadata_address(admin_client):
    form = {"name": "meta", "kind": "nacos", "base_url": "http://169.254.169.254/",
            "namespace": "public", "group": "DEFAULT_GROUP", "api_version": "auto",
            "username": "", "password": "", "sync_interval": "5.0", "enabled": "on"}  # fmt: skip
    response = admin_client.post("/admin/registry_sync/registry/add/", form)
    assert response.status_code == 200
    [error] = response.context["adminform"].form.errors["base_url"]
    assert error.startswith("169.254.169.254 is a cloud metadata address")
    assert not Registry.objects.filter(name="meta").exists()


def test_a_registry_saved_before_the_policy_is_refused_at_connect(api):
    """Rows from before the policy (or written around it) meet it when the sync connects:
    no request is sent, the registry is stale with the reason, for admins only."""
    registry = Registry.objects.create(
        name="legacy", kind="nacos", base_url="http://169.254.169.254:8848/nacos"
    )
    with pytest.raises(SyncFailed, match="169.254.169.254 is a cloud metadata address"):
        sync_registry(registry)
    registry.refresh_from_db()
    assert registry.stale
    url = f"/api/v1/registries/{registry.pk}/"
    assert (
        "169.254.169.254 is a cloud metadata address" in api("admin").get(url).json()["last_error"]
    )
    assert api("viewer").get(url).json()["last_error"] == UNREACHABLE
    assert api("operator").get(url).json()["last_error"] == UNREACHABLE


def test_viewers_do_not_learn_whether_a_port_is_open_or_what_answered(api, make_user, client):
    """A closed port, and an HTTP server that is not Nacos: admins see each (and its body),
    viewers the same word for both."""
    closed = Registry.objects.create(
        name="closed", kind="nacos", base_url=f"http://127.0.0.1:{free_port()}/nacos"
    )
    with FakeNacos() as server:
        server.add_instance("user-app", "10.0.0.1", 7201, metadata={"version": "V1"})
        talking = Registry.objects.create(name="talking", kind="nacos", base_url=server.url)
        sync_registry(talking)
        server.fail_with(500, "internal-only banner: build 4711")
        for registry in (closed, talking):
            with pytest.raises(SyncFailed):
                sync_registry(registry)
    admin, viewer = api("admin"), api("viewer")
    errors = {
        r["name"]: r["last_error"] for r in admin.get("/api/v1/registries/").json()["results"]
    }
    assert "cannot connect to Nacos" in errors["closed"]
    assert "internal-only banner: build 4711" in errors["talking"]
    shown = {
        r["name"]: r["last_error"] for r in viewer.get("/api/v1/registries/").json()["results"]
    }
    assert (shown["closed"], shown["talking"]) == (UNREACHABLE, UNREACHABLE)
    assert Instance.objects.get(host="10.0.0.1").state == "UP"  # stale, nothing deleted

    client.force_login(make_user("vera", "viewer"))
    page = client.get("/").content.decode()
    assert "internal-only banner" not in page and "cannot connect" not in page
    assert page.count(UNREACHABLE) >= 2
    client.force_login(make_user("ada", "admin"))
    assert "internal-only banner: build 4711" in client.get("/").content.decode()


def test_what_a_good_sync_skipped_is_shown_to_everyone(api):
    with FakeNacos() as server:
        server.add_instance("user-app", "10.0.0.1", 7201, metadata={"version": "V1"})
        server.add_instance("user-app", "10.0.0.2", 0, metadata={"version": "V1"})
        registry = Registry.objects.create(name="skips", kind="nacos", base_url=server.url)
        sync_registry(registry)
    shown = api("viewer").get(f"/api/v1/registries/{registry.pk}/").json()
    assert shown["stale"] is False and shown["skipped_instances"] == 1
    assert shown["last_error"] != UNREACHABLE and "10.0.0.2" in shown["last_error"]
