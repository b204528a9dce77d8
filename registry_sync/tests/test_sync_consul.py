"""A Consul registry synced against the Consul contract fake: states, an outage (stale,
nothing lost), taking an instance out of traffic, and the watch that starts a pass as soon
as Consul changes."""

import re
import threading
import time

import pytest

from audit.models import AuditEntry
from registry_sync import consul_watch, tasks
from registry_sync.models import Instance, Registry
from registry_sync.services import take_offline
from registry_sync.sync import SyncFailed, sync_registry
from testing.fakes.consul_fake import FakeConsul

pytestmark = pytest.mark.django_db


@pytest.fixture
def consul():
    with FakeConsul(token="t0ken") as fake:
        fake.register("user-app", "10.0.0.1", 7201, service_id="user-1", meta={"version": "V1"})
        fake.register("user-app", "10.0.0.2", 7201, service_id="user-2", meta={"version": "V2"},
                      node="node-2")  # fmt: skip
        fake.register("order-app", "10.0.1.1", 7301, meta={"version": "V1"})
        yield fake


@pytest.fixture
def registry(consul):
    return Registry.objects.create(
        name="consul", kind=Registry.CONSUL, base_url=consul.url, token="t0ken", datacenter="dc1"
    )


def rows():
    return {
        (i.service.name, i.instance_id): (i.host, i.version, i.state)
        for i in Instance.objects.select_related("service")
    }


def test_a_sync_stores_instances_with_their_versions_and_states(consul, registry):
    consul.set_check("order-app", "critical")
    summary = sync_registry(registry)
    assert (summary.added, summary.services_added) == (3, 2)
    assert rows() == {
        ("user-app", "user-1@node-1"): ("10.0.0.1", "V1", "UP"),
        ("user-app", "user-2@node-2"): ("10.0.0.2", "V2", "UP"),
        ("order-app", "order-app@node-1"): ("10.0.1.1", "V1", "UNHEALTHY"),
    }
    consul.deregister("user-app", "user-2", node="node-2")
    again = sync_registry(registry)
    assert again.gone == 1 and rows()[("user-app", "user-2@node-2")][2] == "DOWN"


@pytest.mark.parametrize("outage", ["500", "down", "token revoked"])
def test_a_consul_outage_marks_the_registry_stale_and_loses_nothing(
    consul, registry, outage, client, make_user
):
    sync_registry(registry)
    before = rows()
    if outage == "500":
        consul.fail_with(500, "rpc error making call: No cluster leader")
    elif outage == "down":
        consul.stop()
    else:
        consul.token = "rotated"
    with pytest.raises(SyncFailed):
        sync_registry(registry)
    registry.refresh_from_db()
    assert registry.stale is True
    expected = {"500": "No cluster leader", "down": "cannot connect to Consul",
                "token revoked": "ACL not found"}[outage]  # fmt: skip
    assert expected in registry.last_error
    assert "t0ken" not in registry.last_error
    assert rows() == before  # every instance kept as it was, none DOWN

    shown = _overview_row(client, make_user)
    # The overview's registries table: its kind, its 2 services, stale; a viewer is not told why.
    assert "consul Consul 2" in shown and "stale unreachable (admins see why)" in shown

    if outage == "down":
        return  # the fake cannot come back on the same port
    consul.fail_with(None)
    consul.token = "t0ken"
    sync_registry(registry)
    registry.refresh_from_db()
    assert (registry.stale, registry.last_error) == (False, "")


def _overview_row(client, make_user) -> str:
    client.force_login(make_user("vera", "viewer"))
    html = client.get("/").content.decode()
    row = re.search(r'<tr data-registry="consul">.*?</tr>', html, re.S)
    assert row is not None
    return " ".join(re.sub(r"<[^>]+>", " ", row.group(0)).split())


def test_taking_a_local_instance_offline_puts_it_in_maintenance(consul, registry):
    sync_registry(registry)
    row = Instance.objects.get(instance_id="user-1@node-1")
    take_offline(row.pk, actor="olga", source="api")
    assert consul.in_maintenance("user-1")
    sync_registry(registry)
    row.refresh_from_db()
    assert (row.enabled, row.state) in {(False, "DRAINING"), (False, "OFFLINE")}


def test_an_instance_of_another_node_cannot_be_put_in_maintenance_and_the_operator_sees_why(
    consul, registry
):
    sync_registry(registry)
    row = Instance.objects.get(instance_id="user-2@node-2")
    take_offline(row.pk, actor="olga", source="api")
    sync_registry(registry)  # the pass re-applies the intent, and says why it cannot
    row.refresh_from_db()
    assert row.offline_intent is True and row.state in {"DRAINING", "OFFLINE"}  # not routed
    assert "node-2" in row.note and "consul maint" in row.note
    assert not consul.in_maintenance("user-2", node="node-2")
    sync_registry(registry)
    sync_registry(registry)  # the same refusal again: noted and audited once
    assert AuditEntry.objects.filter(action="instance.offline.reapplied").count() == 1


def test_maintenance_set_in_consul_takes_the_instance_out_of_traffic(consul, registry):
    sync_registry(registry)
    consul.set_maintenance("user-1", True, reason="kernel update")  # consul maint on node-1
    sync_registry(registry)
    row = Instance.objects.get(instance_id="user-1@node-1")
    assert (row.enabled, row.state, row.healthy) == (False, "OFFLINE", True)


@pytest.fixture
def fast_watch(monkeypatch, consul):
    monkeypatch.setattr(consul_watch, "WAIT_SECONDS", 30.0)
    monkeypatch.setattr(consul_watch, "RETRY_SECONDS", 0.2)
    yield
    consul.stop()  # hangs up on the blocked queries, so the watches end at once
    consul_watch.stop_all()


@pytest.mark.parametrize(
    "change",
    [
        lambda c: c.register("cart-app", "10.0.4.1", 7501),
        lambda c: c.set_check("user-app", "critical", service_id="user-1"),
    ],
    ids=["registration", "check"],
)
def test_the_watch_asks_for_a_pass_as_soon_as_consul_changes(consul, registry, fast_watch, change):
    asked = threading.Event()
    consul_watch.keep_watching(registry, asked.set)
    # Both blocking queries are waiting on the index of their first answer.
    for path in ("/v1/catalog/services", "/v1/health/state/any"):
        assert _eventually(lambda path=path: len(consul.requests_to(path)) >= 2)
    assert not asked.wait(0.3)  # nothing changed: no pass asked for
    change(consul)
    assert asked.wait(5)  # long before the 30 s wait is over
    indexes = [p["index"] for p in consul.requests_to("/v1/catalog/services")]
    assert indexes[0] == "0" and int(indexes[1]) > 0


def test_the_watch_comes_back_after_an_outage(consul, registry, fast_watch):
    asked = threading.Event()
    consul_watch.keep_watching(registry, asked.set)
    assert _eventually(lambda: len(consul.requests_to("/v1/health/state/any")) >= 2)
    consul.fail_with(500, "No cluster leader")
    failed_from = len(consul.requests_to("/v1/catalog/services"))
    assert _eventually(lambda: len(consul.requests_to("/v1/catalog/services")) >= failed_from + 3)
    consul.fail_with(None)
    blocking = len(consul.requests_to("/v1/catalog/services")) + 1
    assert _eventually(lambda: len(consul.requests_to("/v1/catalog/services")) > blocking)
    assert not asked.is_set()  # an outage is not a change; the periodic pass marks it stale
    consul.register("cart-app", "10.0.4.1", 7501)
    assert asked.wait(5)


def _eventually(predicate, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def test_a_pass_of_the_task_starts_the_watch_which_queues_the_next_pass(
    consul, registry, fast_watch, monkeypatch
):
    queued = threading.Event()
    monkeypatch.setattr(tasks.sync_one, "delay", lambda registry_id: queued.set())
    tasks.sync_one(registry.pk)
    assert Instance.objects.count() == 3  # the pass itself
    assert _eventually(lambda: len(consul.requests_to("/v1/health/state/any")) >= 2)
    consul.set_check("order-app", "critical")
    assert queued.wait(5)


def test_a_large_consul_catalog_is_read_whole_with_threads_allowed(consul, registry):
    for n in range(200):  # enough for read_registry to time one thread against several
        consul.register(f"svc-{n}", f"10.2.{n // 250}.{n % 250}", 8080, meta={"version": "V1"})
    summary = sync_registry(registry)
    assert summary.added == 203 and summary.services_added == 202
    assert Instance.objects.filter(state="UP").count() == 203
