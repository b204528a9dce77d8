"""The Consul adapter against the Consul contract fake over loopback HTTP: catalog and health
reads, maintenance as disabled, the ACL token, the datacenter, and blocking queries."""

import threading
import time

import pytest

from registry_sync.adapters import ConsulAdapter, RegistryError, SkippedInstance, build_adapter
from registry_sync.adapters.consul import next_index
from testing.fakes.consul_fake import FakeConsul

CATALOG = "/v1/catalog/services"
CHECKS = "/v1/health/state/any"


@pytest.fixture
def consul():
    with FakeConsul() as fake:
        fake.register("user-app", "10.0.0.1", 7201, service_id="user-app-1", meta={"version": "V1"})
        fake.register("user-app", "10.0.0.2", 7201, service_id="user-app-2",
                      meta={"version": "V2"}, weight=3, node="node-2")  # fmt: skip
        fake.register("order-app", "10.0.1.1", 7301, meta={"version": "V1"})
        fake.register("consul", "10.0.9.1", 8300, check_status=None)
        yield fake


def by_id(adapter, service):
    return {i.instance_id: i for i in adapter.list_instances(service)}


def test_services_and_instances_are_read_from_the_catalog_and_health(consul):
    with ConsulAdapter(consul.url) as adapter:
        assert adapter.list_services() == ["order-app", "user-app"]  # not Consul's own
        instances = by_id(adapter, "user-app")
    assert set(instances) == {"user-app-1@node-1", "user-app-2@node-2"}
    second = instances["user-app-2@node-2"]
    assert (second.host, second.port, second.weight) == ("10.0.0.2", 7201, 3.0)
    assert second.metadata == {"version": "V2"}
    assert (second.healthy, second.enabled, second.status) == (True, True, "UP")
    assert ConsulAdapter(consul.url).list_instances("ghost") == []


def test_check_states_map_to_health(consul):
    consul.set_check("user-app", "warning", service_id="user-app-1")
    consul.set_check("order-app", "critical")
    with ConsulAdapter(consul.url) as adapter:
        warned = by_id(adapter, "user-app")["user-app-1@node-1"]
        down = by_id(adapter, "order-app")["order-app@node-1"]
    assert (warned.healthy, warned.status) == (False, "WARNING")
    assert (down.healthy, down.status, down.enabled) == (False, "DOWN", True)


def test_an_empty_service_address_is_the_nodes_and_a_bad_entry_is_skipped(consul):
    consul.register("pay-app", "", 7401)
    consul.register("pay-app", "10.0.2.2", 7401, service_id="pay-broken")
    consul.registrations[("node-1", "pay-broken")].service["Port"] = "eighty"
    with ConsulAdapter(consul.url) as adapter:
        good, bad = adapter.list_instances("pay-app")
    assert (good.instance_id, good.host) == ("pay-app@node-1", "10.0.9.1")
    assert isinstance(bad, SkippedInstance) and bad.instance_id == "pay-broken"
    assert "not a whole number" in bad.reason


def test_the_version_key_is_configurable(consul):
    consul.register("web", "10.0.3.1", 80, meta={"release": "2.4.1", "version": "ignored"})
    with ConsulAdapter(consul.url, version_key="release") as adapter:
        (web,) = adapter.list_instances("web")
    assert web.metadata["version"] == "2.4.1" and web.metadata["release"] == "2.4.1"


def test_maintenance_is_disabled_and_set_enabled_toggles_it_on_the_local_agent(consul):
    with ConsulAdapter(consul.url) as adapter:
        local = by_id(adapter, "user-app")["user-app-1@node-1"]
        adapter.set_enabled(local, False)
        assert consul.in_maintenance("user-app-1")
        assert consul.requests_to("/maintenance/user-app-1", "PUT")[-1]["reason"]
        off = by_id(adapter, "user-app")["user-app-1@node-1"]
        assert (off.enabled, off.healthy) == (False, True)  # out of traffic, not sick
        adapter.set_enabled(off, True)
        assert not consul.in_maintenance("user-app-1")
        assert by_id(adapter, "user-app")["user-app-1@node-1"].enabled is True


def test_set_enabled_refuses_an_instance_of_another_node_without_sending_anything(consul):
    with ConsulAdapter(consul.url) as adapter:
        remote = by_id(adapter, "user-app")["user-app-2@node-2"]
        with pytest.raises(RegistryError) as refused:
            adapter.set_enabled(remote, False)
    message = str(refused.value)
    assert "'node-2'" in message and "'node-1'" in message and "consul maint" in message
    assert consul.url not in message
    assert consul.requests_to("/maintenance/user-app-2", "PUT") == []
    assert not consul.in_maintenance("user-app-2", node="node-2")


def test_the_acl_token_is_sent_and_refusals_are_errors():
    with FakeConsul(token="s3cret-token") as consul:
        consul.register("user-app", "10.0.0.1", 7201)
        with ConsulAdapter(consul.url, token="s3cret-token") as adapter:
            assert adapter.list_services() == ["user-app"]
        assert consul.headers_log[-1]["x-consul-token"] == "s3cret-token"

        with pytest.raises(RegistryError) as unknown:
            ConsulAdapter(consul.url, token="wrong").list_services()
        assert unknown.value.status == 403 and "ACL not found" in str(unknown.value)
        assert "wrong" not in str(unknown.value)

        # No token: the anonymous one, whose reads Consul filters to nothing. A short listing
        # would make instances look gone, so it is an error.
        with pytest.raises(RegistryError) as filtered:
            ConsulAdapter(consul.url).list_instances("user-app")
        assert "filtered" in str(filtered.value) and "node:read" in str(filtered.value)
        instance = by_id(ConsulAdapter(consul.url, token="s3cret-token"), "user-app")
        with pytest.raises(RegistryError) as denied:
            ConsulAdapter(consul.url).set_enabled(instance["user-app@node-1"], False)
        assert denied.value.status == 403 and "ACL token refused" in str(denied.value)
        assert not consul.in_maintenance("user-app")


def test_the_datacenter_is_asked_for(consul):
    with ConsulAdapter(consul.url, datacenter="dc1") as adapter:
        assert adapter.list_services() == ["order-app", "user-app"]
    assert consul.requests_to(CATALOG)[-1]["dc"] == "dc1"
    with pytest.raises(RegistryError) as refused:
        ConsulAdapter(consul.url, datacenter="eu-west").list_services()
    assert refused.value.status == 500 and "No path to datacenter" in str(refused.value)
    with pytest.raises(ValueError):
        ConsulAdapter(consul.url, datacenter="eu west")


@pytest.mark.parametrize(
    ("path", "change"),
    [
        (CATALOG, lambda c: c.register("cart-app", "10.0.4.1", 7501)),
        (CHECKS, lambda c: c.set_check("order-app", "critical")),
    ],
)
def test_a_blocking_query_returns_as_soon_as_something_changes(consul, path, change):
    with ConsulAdapter(consul.url) as adapter:
        index = adapter.wait_for_change(path, 0, 30)  # index 0: at once, the current index
        assert index > 0
        timer = threading.Timer(0.3, change, args=(consul,))
        started = time.monotonic()
        timer.start()
        try:
            changed = adapter.wait_for_change(path, index, 30)
        finally:
            timer.cancel()
        took = time.monotonic() - started
    assert 0.25 < took < 10, took  # woken by the change, long before the 30 s wait
    assert changed > index
    asked = consul.requests_to(path)[-1]
    assert (asked["index"], asked["wait"]) == (str(index), "30000ms")


def test_a_blocking_query_without_a_change_waits_and_keeps_the_index(consul):
    with ConsulAdapter(consul.url) as adapter:
        index = adapter.wait_for_change(CATALOG, 0, 1)
        started = time.monotonic()
        assert adapter.wait_for_change(CATALOG, index, 0.4) == index
    assert time.monotonic() - started >= 0.4


def test_an_index_that_goes_backwards_starts_over_and_zero_becomes_one():
    assert next_index(10, 12) == 12
    assert next_index(12, 12) == 12
    assert next_index(12, 5) == 0  # snapshot restore or a new leader: start over
    assert next_index(0, 0) == 1  # never 0 after a read: that would not block


def test_an_outage_is_a_registry_error(consul):
    adapter = ConsulAdapter(consul.url, timeout=1.0)
    consul.fail_with(500, "rpc error: No cluster leader")
    with pytest.raises(RegistryError) as failed:
        adapter.list_services()
    assert failed.value.status == 500 and "No cluster leader" in str(failed.value)
    consul.fail_with(None)
    consul.stop()
    with pytest.raises(RegistryError) as refused:
        adapter.list_services()
    assert refused.value.status is None and "cannot connect to Consul" in str(refused.value)
    adapter.close()


def test_an_unexpected_answer_is_a_registry_error_and_build_adapter_makes_a_consul_one(consul):
    adapter = build_adapter("consul", base_url=consul.url, datacenter="dc1", token="t")
    assert isinstance(adapter, ConsulAdapter) and adapter.datacenter == "dc1"
    consul.fail_with(200, json_body=["not", "a", "map"])
    with pytest.raises(RegistryError, match="unexpected shape to list services"):
        adapter.list_services()
    consul.fail_with(200, json_body={"not": "a list"})
    with pytest.raises(RegistryError, match="unexpected shape to list instances"):
        adapter.list_instances("user-app")
    adapter.close()
