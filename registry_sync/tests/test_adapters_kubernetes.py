"""KubernetesAdapter against the FakeKubernetes contract fake over real loopback HTTP (no
Django): list, then watch from the list's resourceVersion; 410 Gone → list again."""

from __future__ import annotations

import socket

import pytest
import yaml

from registry_sync.adapters import (
    TERMINATING,
    KubernetesAdapter,
    RegistryAdapter,
    RegistryError,
    build_adapter,
)
from registry_sync.adapters.kubernetes_watch import WatchStore
from testing.fakes.kubernetes_fake import FakeEndpoint, FakeKubernetes

TOKEN = "sa-token-1"
V = "app.kubernetes.io/version"


@pytest.fixture
def k8s():
    with FakeKubernetes(token=TOKEN) as fake:
        fake.put_pod("shop", "orders-v1-a", "10.1.0.1", {V: "V1"})
        fake.put_pod("shop", "orders-v1-b", "10.1.0.2", {V: "V1"})
        fake.put_slice(
            "shop",
            "orders-x1",
            "orders",
            [FakeEndpoint("orders-v1-a"), FakeEndpoint("orders-v1-b")],
        )
        yield fake


@pytest.fixture
def make_adapter():
    adapters: list[KubernetesAdapter] = []

    def make(fake: FakeKubernetes, **kwargs) -> KubernetesAdapter:
        kwargs.setdefault("namespaces", ["shop"])
        kwargs.setdefault("token", TOKEN)
        kwargs.setdefault("timeout", 2.0)
        kwargs.setdefault("watches", WatchStore())
        adapter = KubernetesAdapter(fake.root_url, **kwargs)
        adapters.append(adapter)
        return adapter

    yield make
    for adapter in adapters:
        adapter.close()


def one_pass(adapter: KubernetesAdapter) -> dict[str, dict[str, object]]:
    """What a sync pass reads: service -> instance id -> (host, port, version, status)."""
    return {
        service: {
            i.instance_id: (i.host, i.port, i.metadata.get("version"), i.status, i.healthy)
            for i in adapter.list_instances(service)
        }
        for service in adapter.list_services()
    }


def test_lists_services_with_the_version_from_each_pods_label(k8s, make_adapter):
    adapter = make_adapter(k8s)
    assert isinstance(adapter, RegistryAdapter)
    assert one_pass(adapter) == {
        "orders": {
            "shop:orders-v1-a:10.1.0.1:8080": ("10.1.0.1", 8080, "V1", "UP", True),
            "shop:orders-v1-b:10.1.0.2:8080": ("10.1.0.2", 8080, "V1", "UP", True),
        }
    }
    (instance, _) = adapter.list_instances("orders")
    assert instance.metadata["kubernetes.pod"] == "orders-v1-a"
    assert instance.metadata["kubernetes.namespace"] == "shop"
    assert k8s.headers_log[0]["authorization"] == f"Bearer {TOKEN}"


def test_the_next_pass_watches_from_the_lists_version_and_sees_a_scale_up(k8s, make_adapter):
    watches = WatchStore()
    first = make_adapter(k8s, watches=watches)
    one_pass(first)
    listed_at = str(k8s.revision)
    # a canary: one more Pod of another version behind the same Service
    k8s.put_pod("shop", "orders-v2-a", "10.1.0.3", {V: "V2"})
    k8s.put_slice(
        "shop",
        "orders-x1",
        "orders",
        [FakeEndpoint("orders-v1-a"), FakeEndpoint("orders-v1-b"), FakeEndpoint("orders-v2-a")],
    )

    second = make_adapter(k8s, watches=watches)  # a new pass builds a new adapter
    seen = one_pass(second)

    assert seen["orders"]["shop:orders-v2-a:10.1.0.3:8080"] == ("10.1.0.3", 8080, "V2", "UP", True)
    assert len(seen["orders"]) == 3
    assert len(k8s.lists()) == 1, "the second pass must watch, not list again"
    (watch,) = k8s.watches()
    assert watch["resourceVersion"] == listed_at
    assert watch["allowWatchBookmarks"] == "true"
    one_pass(make_adapter(k8s, watches=watches))
    assert k8s.pod_reads == 1, "the listed Pods are not read again, the new one once"


def test_a_pod_gone_before_it_is_read_leaves_its_endpoint_without_version(k8s, make_adapter):
    watches = WatchStore()
    one_pass(make_adapter(k8s, watches=watches))
    k8s.put_pod("shop", "orders-v2-a", "10.1.0.3", {V: "V2"})
    k8s.put_slice("shop", "orders-x1", "orders", [FakeEndpoint("orders-v2-a")])
    k8s.delete_pod("shop", "orders-v2-a")
    seen = one_pass(make_adapter(k8s, watches=watches))
    assert seen["orders"] == {
        "shop:orders-v2-a:10.1.0.3:8080": ("10.1.0.3", 8080, None, "UP", True)
    }


def test_a_deleted_slice_and_a_scale_down_leave_the_listing(k8s, make_adapter):
    watches = WatchStore()
    k8s.put_pod("shop", "pay-1", "10.2.0.1")
    k8s.put_slice("shop", "pay-x", "payments", [FakeEndpoint("pay-1")])
    assert set(one_pass(make_adapter(k8s, watches=watches))) == {"orders", "payments"}
    k8s.delete_slice("shop", "pay-x")
    k8s.put_slice("shop", "orders-x1", "orders", [FakeEndpoint("orders-v1-a")])

    seen = one_pass(make_adapter(k8s, watches=watches))

    assert seen == {
        "orders": {"shop:orders-v1-a:10.1.0.1:8080": ("10.1.0.1", 8080, "V1", "UP", True)}
    }


def test_terminating_endpoints_are_draining_and_not_ready_ones_unhealthy(k8s, make_adapter):
    k8s.put_slice(
        "shop",
        "orders-x1",
        "orders",
        [
            FakeEndpoint("orders-v1-a", ready=False, serving=True, terminating=True),
            FakeEndpoint("orders-v1-b", ready=False, serving=False, terminating=False),
        ],
    )
    seen = one_pass(make_adapter(k8s))["orders"]
    assert seen["shop:orders-v1-a:10.1.0.1:8080"][3:] == (TERMINATING, True)
    assert seen["shop:orders-v1-b:10.1.0.2:8080"][3:] == ("NOT_READY", False)


@pytest.mark.parametrize("gone_as_status", [False, True], ids=["error-event", "http-410"])
def test_410_gone_lists_again_and_misses_nothing(gone_as_status, make_adapter):
    with FakeKubernetes(token=TOKEN, gone_as_status=gone_as_status) as k8s:
        k8s.put_pod("shop", "a", "10.1.0.1", {V: "V1"})
        k8s.put_slice("shop", "s1", "orders", [FakeEndpoint("a")])
        watches = WatchStore()
        one_pass(make_adapter(k8s, watches=watches))
        k8s.put_pod("shop", "b", "10.1.0.2", {V: "V2"})
        k8s.put_slice("shop", "s1", "orders", [FakeEndpoint("a"), FakeEndpoint("b")])
        k8s.compact()  # the change above is no longer in the server's history

        seen = one_pass(make_adapter(k8s, watches=watches))

        assert sorted(v[2] for v in seen["orders"].values()) == ["V1", "V2"]
        assert len(k8s.watches()) == 1 and len(k8s.lists()) == 2
        # and the watch resumes from the new list's version afterwards
        one_pass(make_adapter(k8s, watches=watches))
        assert k8s.watches()[-1]["resourceVersion"] == str(k8s.revision)


def test_a_pod_without_the_label_has_no_version_and_the_label_is_configurable(k8s, make_adapter):
    k8s.put_pod("shop", "legacy", "10.1.0.9", {"app": "orders"})
    k8s.put_pod("shop", "tagged", "10.1.0.8", {"release": "V7"})
    k8s.put_slice("shop", "s2", "legacy", [FakeEndpoint("legacy"), FakeEndpoint("tagged")])

    default = one_pass(make_adapter(k8s))["legacy"]
    custom = one_pass(make_adapter(k8s, version_label="release"))["legacy"]

    assert sorted(v[2] or "-" for v in default.values()) == ["-", "-"]
    assert sorted(v[2] or "-" for v in custom.values()) == ["-", "V7"]
    (legacy,) = [i for i in make_adapter(k8s).list_instances("legacy") if "legacy" in i.instance_id]
    assert "version" not in legacy.metadata


def test_an_endpoint_without_a_pod_takes_the_label_of_its_slice(k8s, make_adapter):
    k8s.put_slice(
        "shop",
        "ext-1",
        "external",
        [FakeEndpoint(address="192.0.2.10")],
        ports=[("metrics", 9090), ("http", 80)],
        labels={V: "V5"},
    )
    seen = one_pass(make_adapter(k8s))["external"]
    assert seen == {"shop:192.0.2.10:80": ("192.0.2.10", 80, "V5", "UP", True)}


def test_slices_of_no_service_are_ignored_and_unreadable_endpoints_skipped(k8s, make_adapter):
    k8s.put_slice("shop", "loose", None, [FakeEndpoint("orders-v1-a")])
    k8s.put_slice("shop", "noport", "noport", [FakeEndpoint("orders-v1-a")], ports=[])
    adapter = make_adapter(k8s)
    assert adapter.list_services() == ["noport", "orders"]
    (skipped,) = adapter.list_instances("noport")
    assert skipped.reason == "the EndpointSlice lists no port"


def test_one_service_name_in_two_namespaces_is_skipped_not_merged(k8s, make_adapter):
    k8s.put_pod("staging", "orders-s", "10.9.0.1")
    k8s.put_slice("staging", "orders-y", "orders", [FakeEndpoint("orders-s")])
    adapter = make_adapter(k8s, namespaces=["shop", "staging"])
    assert adapter.list_services() == ["orders"]
    (skipped,) = adapter.list_instances("orders")
    assert "namespaces shop, staging" in skipped.reason


def test_a_wrong_token_is_a_registry_error_naming_the_status(k8s, make_adapter):
    with pytest.raises(RegistryError) as caught:
        make_adapter(k8s, token="wrong").list_services()
    assert caught.value.status == 401
    assert "wrong" not in str(caught.value)


def test_an_unreachable_api_server_is_a_registry_error(make_adapter):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    adapter = KubernetesAdapter(
        f"http://127.0.0.1:{port}", namespaces=["shop"], token=TOKEN, watches=WatchStore()
    )
    with pytest.raises(RegistryError, match="cannot connect to Kubernetes"):
        adapter.list_services()
    adapter.close()


def test_a_watch_that_fails_midway_keeps_what_it_applied(k8s, make_adapter):
    watches = WatchStore()
    one_pass(make_adapter(k8s, watches=watches))
    k8s.fail_with(500, json_body={"kind": "Status", "code": 500, "message": "etcd unhappy"})
    with pytest.raises(RegistryError, match="HTTP 500"):
        make_adapter(k8s, watches=watches).list_services()
    k8s.fail_with(None)
    assert len(one_pass(make_adapter(k8s, watches=watches))["orders"]) == 2
    assert len(k8s.lists()) == 1


def test_a_kubeconfig_file_gives_the_server_and_the_token(k8s, make_adapter, tmp_path):
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "lab", "cluster": {"server": k8s.root_url}}],
                "users": [{"name": "graylane", "user": {"token": TOKEN}}],
                "contexts": [{"name": "lab", "context": {"cluster": "lab", "user": "graylane"}}],
                "current-context": "lab",
            }
        )
    )
    adapter = build_adapter("kubernetes", base_url="", namespace="shop", kubeconfig=str(kubeconfig))
    try:
        assert adapter.list_services() == ["orders"]
    finally:
        adapter.close()


def test_no_token_no_kubeconfig_outside_a_cluster_says_so(monkeypatch):
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    adapter = build_adapter("kubernetes", base_url="", namespace="shop")
    with pytest.raises(RegistryError, match="in-cluster service account"):
        adapter.list_services()
    adapter.close()


def test_bookmarks_keep_a_quiet_namespace_watch_past_a_compaction(k8s, make_adapter):
    watches = WatchStore()
    one_pass(make_adapter(k8s, watches=watches))
    k8s.put_pod("busy", "job-1", "10.8.0.1")  # the cluster moves on elsewhere
    k8s.put_slice("busy", "jobs-x", "jobs", [FakeEndpoint("job-1")])
    one_pass(make_adapter(k8s, watches=watches))  # nothing for shop, but a BOOKMARK
    assert watches.of(k8s.root_url, "shop").resource_version == str(k8s.revision)
    k8s.compact()

    assert len(one_pass(make_adapter(k8s, watches=watches))["orders"]) == 2
    assert len(k8s.lists()) == 1, "the bookmark's version is still in the history: no relist"


def test_a_kubeconfig_that_cannot_be_read_is_a_registry_error_naming_it(tmp_path):
    missing = tmp_path / "nope"
    broken = tmp_path / "broken"
    broken.write_text("apiVersion: v1\nkind: Config\nclusters: []\n")
    for path in (missing, broken):
        adapter = build_adapter("kubernetes", base_url="", namespace="shop", kubeconfig=str(path))
        with pytest.raises(RegistryError, match=f"cannot use the kubeconfig {path}"):
            adapter.list_services()
        adapter.close()
