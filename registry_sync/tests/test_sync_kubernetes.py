"""The sync of a Kubernetes registry against the FakeKubernetes contract fake over loopback
HTTP: add, scale, terminating → DRAINING, 410 Gone → relist, a Pod without the version label
→ no version, an unreachable API server → stale with nothing deleted; and a release bundle
over services of two registries."""

import re

import pytest

from audit.models import AuditEntry
from gateways.gateway_document import build_document
from policy.publishing import load_state
from policy.services import update_policy
from registry_sync.adapters.kubernetes_watch import PROCESS_WATCHES
from registry_sync.models import Instance, Registry
from registry_sync.services import take_offline
from registry_sync.sync import SyncFailed, sync_registry
from testing.fakes.eureka_fake import FakeEureka
from testing.fakes.kubernetes_fake import FakeEndpoint, FakeKubernetes

pytestmark = pytest.mark.django_db

TOKEN = "sa-token-1"
V = "app.kubernetes.io/version"


@pytest.fixture(autouse=True)
def fresh_watches():
    """Each test's fake is a new API server; a port reused must not resume an old watch."""
    PROCESS_WATCHES.clear()
    yield
    PROCESS_WATCHES.clear()


@pytest.fixture
def k8s():
    with FakeKubernetes(token=TOKEN) as fake:
        fake.put_pod("shop", "orders-v1-a", "10.1.0.1", {V: "V1"})
        fake.put_slice("shop", "orders-x", "orders", [FakeEndpoint("orders-v1-a")])
        yield fake


@pytest.fixture
def registry(k8s):
    return Registry.objects.create(
        name="cluster", kind="kubernetes", base_url=k8s.root_url, namespace="shop", token=TOKEN
    )


def rows():
    return {
        i.host: (i.state, i.version)
        for i in Instance.objects.filter(service__name="orders").order_by("host")
    }


def test_add_scale_terminate_and_remove(k8s, registry):
    summary = sync_registry(registry)
    assert (summary.added, summary.services_added) == (1, 1)
    assert rows() == {"10.1.0.1": ("UP", "V1")}
    assert Instance.objects.get(host="10.1.0.1").service.registry == registry

    # scale up with a canary: a V2 Pod, not ready yet, then ready
    k8s.put_pod("shop", "orders-v2-a", "10.1.0.2", {V: "V2"})
    k8s.put_slice(
        "shop",
        "orders-x",
        "orders",
        [FakeEndpoint("orders-v1-a"), FakeEndpoint("orders-v2-a", ready=False)],
    )
    sync_registry(registry)
    assert rows() == {"10.1.0.1": ("UP", "V1"), "10.1.0.2": ("UNHEALTHY", "V2")}
    k8s.put_slice(
        "shop", "orders-x", "orders", [FakeEndpoint("orders-v1-a"), FakeEndpoint("orders-v2-a")]
    )
    sync_registry(registry)
    assert rows() == {"10.1.0.1": ("UP", "V1"), "10.1.0.2": ("UP", "V2")}

    # the V1 Pod is deleted: terminating (still serving its requests), then gone
    k8s.put_slice(
        "shop",
        "orders-x",
        "orders",
        [
            FakeEndpoint("orders-v1-a", ready=False, serving=True, terminating=True),
            FakeEndpoint("orders-v2-a"),
        ],
    )
    sync_registry(registry)
    assert rows()["10.1.0.1"] == ("DRAINING", "V1")
    k8s.put_slice("shop", "orders-x", "orders", [FakeEndpoint("orders-v2-a")])
    sync_registry(registry)
    assert rows() == {"10.1.0.1": ("DOWN", "V1"), "10.1.0.2": ("UP", "V2")}
    assert len(k8s.lists()) == 1 and len(k8s.watches()) == 4


def test_410_gone_relists_and_the_sync_misses_nothing(k8s, registry):
    sync_registry(registry)
    k8s.put_pod("shop", "orders-v2-a", "10.1.0.2", {V: "V2"})
    k8s.put_slice(
        "shop", "orders-x", "orders", [FakeEndpoint("orders-v1-a"), FakeEndpoint("orders-v2-a")]
    )
    k8s.compact()
    summary = sync_registry(registry)
    assert summary.added == 1
    assert rows() == {"10.1.0.1": ("UP", "V1"), "10.1.0.2": ("UP", "V2")}
    assert len(k8s.lists()) == 2
    registry.refresh_from_db()
    assert not registry.stale


def test_a_pod_without_the_version_label_has_no_version_unless_the_registry_gives_one(
    k8s, registry
):
    k8s.put_pod("shop", "orders-plain", "10.1.0.3", {"app": "orders"})
    k8s.put_slice(
        "shop", "orders-x", "orders", [FakeEndpoint("orders-v1-a"), FakeEndpoint("orders-plain")]
    )
    sync_registry(registry)
    assert rows()["10.1.0.3"] == ("UP", None)

    registry.default_version = "V0"
    registry.save()
    sync_registry(registry)
    assert rows()["10.1.0.3"] == ("UP", "V0")
    assert rows()["10.1.0.1"] == ("UP", "V1")


def test_an_unreachable_api_server_marks_stale_and_deletes_nothing(k8s, registry):
    sync_registry(registry)
    k8s.stop()
    with pytest.raises(SyncFailed):
        sync_registry(registry)
    registry.refresh_from_db()
    assert registry.stale and "Kubernetes" in registry.last_error
    assert rows() == {"10.1.0.1": ("UP", "V1")}


def test_an_operators_offline_is_kept_by_graylane_and_never_reapplied(k8s, registry, settings):
    settings.DRAIN_SECONDS = 0
    sync_registry(registry)
    row = Instance.objects.get(host="10.1.0.1")
    take_offline(row.pk, actor="olga", source="api")
    row.refresh_from_db()
    assert row.note == ""  # the registry was "told" (nothing to do): no failure noted
    for _ in range(2):
        summary = sync_registry(registry)
        assert summary.reapplied == 0
    assert rows() == {"10.1.0.1": ("OFFLINE", "V1")}
    assert not AuditEntry.objects.filter(action="instance.offline.reapplied").exists()


def test_a_release_bundle_spans_a_kubernetes_and_a_eureka_service(k8s, registry, api):
    k8s.put_pod("shop", "orders-v2-a", "10.1.0.2", {V: "V2"})
    k8s.put_slice(
        "shop", "orders-x", "orders", [FakeEndpoint("orders-v1-a"), FakeEndpoint("orders-v2-a")]
    )
    with FakeEureka() as eureka:
        eureka.add_instance("user-app", ip="10.0.0.1", metadata={"version": "V1"})
        eureka.add_instance(
            "user-app", "host2:user-app:8080", ip="10.0.0.2", metadata={"version": "V2"}
        )
        other = Registry.objects.create(name="eureka", kind="eureka", base_url=eureka.url)
        sync_registry(registry)
        sync_registry(other)
    load_state()
    update_policy(
        {"enabled": True, "routing": True},
        partial=True,
        actor="setup",
        source="api",
        expected_revision=None,
    )
    body = {
        "name": "checkout",
        "releases": [
            {"service": "orders", "to_version": "V2"},
            {"service": "user-app", "to_version": "V2", "depends_on": ["orders"]},
        ],
        "steps": [{"targeted": True}, {"percent": 100}],
        "analysis": {"interval_s": 5, "min_requests": 50},
    }
    client = api("operator", "olga")
    created = client.post("/api/v1/release-bundles/", body, format="json")
    assert created.status_code == 201, created.json()
    assert [r["service"] for r in created.json()["releases"]] == ["orders", "user-app"]
    started = client.post(f"/api/v1/release-bundles/{created.json()['id']}/start/")
    assert started.json()["state"] == "running"
    services = build_document(1)["services"]
    assert services["orders"]["prod"] == services["user-app"]["prod"] == "V1"
    assert services["orders"]["targeted"] and services["user-app"]["targeted"]


def test_the_overview_shows_the_kubernetes_registry_and_its_instances_without_version(
    k8s, registry, client, make_user
):
    k8s.put_pod("shop", "orders-plain", "10.1.0.3", {"app": "orders"})
    k8s.put_slice(
        "shop", "orders-x", "orders", [FakeEndpoint("orders-v1-a"), FakeEndpoint("orders-plain")]
    )
    sync_registry(registry)
    client.force_login(make_user("vera", "viewer"))
    html = client.get("/").content.decode()
    row = re.search(r'<tr data-registry="cluster">.*?</tr>', html, re.S).group(0)
    shown = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", row))
    assert "Kubernetes (EndpointSlices)" in shown and "1 without version" in shown
