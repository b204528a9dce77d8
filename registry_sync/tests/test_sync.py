"""The sync against contract fakes of Nacos (1.x, 2.x, 3.x) and Eureka over loopback HTTP."""

from datetime import timedelta

import pytest
from django.utils import timezone

from audit.models import AuditEntry
from registry_sync import draining
from registry_sync.models import Instance, Registry, Service
from registry_sync.services import take_offline
from registry_sync.signals import routable_instances_changed
from registry_sync.sync import SyncFailed, _create_services, sync_registry
from registry_sync.tasks import sync_one
from testing.fakes.eureka_fake import FakeEureka

pytestmark = pytest.mark.django_db


def states():
    return {(i.service.name, i.host): i.state for i in Instance.objects.select_related("service")}


def test_first_sync_adds_then_a_quiet_sync_writes_nothing(nacos_registry):
    summary = sync_registry(nacos_registry)
    assert (summary.added, summary.services_added) == (3, 2)
    assert states() == {
        ("user-app", "10.0.0.1"): "UP",
        ("user-app", "10.0.0.2"): "UP",
        ("order-app", "10.0.1.1"): "UP",
    }
    assert Instance.objects.get(host="10.0.0.2").version == "V2"
    again = sync_registry(nacos_registry)
    assert again.rows_written == 0 and again.unchanged == 3


def test_changes_and_disappearances_are_written_and_rows_kept(nacos, nacos_registry):
    sync_registry(nacos_registry)
    nacos.add_instance("user-app", "10.0.0.2", 7201, metadata={"version": "V3"}, healthy=False)
    nacos.remove_instance("order-app", "10.0.1.1", 7301)
    received = []

    def listener(**kw):
        received.append(kw["services"])

    routable_instances_changed.connect(listener)
    try:
        from django.test import TestCase

        with TestCase.captureOnCommitCallbacks(execute=True):
            summary = sync_registry(nacos_registry)
    finally:
        routable_instances_changed.disconnect(listener)
    assert (summary.changed, summary.gone) == (1, 1)
    row = Instance.objects.get(host="10.0.0.2")
    assert (row.version, row.state) == ("V3", "UNHEALTHY")
    assert Instance.objects.get(host="10.0.1.1").state == "DOWN"
    assert received == [["order-app", "user-app"]]


@pytest.mark.parametrize("failure", ["status", "timeout"])
def test_an_outage_marks_stale_changes_nothing_and_recovers(
    nacos, nacos_registry, failure, settings
):
    settings.REGISTRY_TIMEOUT = 0.5
    sync_registry(nacos_registry)
    before = states()
    if failure == "status":
        nacos.fail_with(500)
    else:
        nacos.delay(1.0)
    with pytest.raises(SyncFailed):
        sync_registry(nacos_registry)
    nacos_registry.refresh_from_db()
    assert nacos_registry.stale and nacos_registry.last_error
    assert states() == before
    nacos.fail_with(None)
    nacos.delay(0)
    sync_one(nacos_registry.pk)  # what beat runs next
    nacos_registry.refresh_from_db()
    assert not nacos_registry.stale and nacos_registry.last_error == ""
    assert states() == before


def test_offline_is_a_partial_update_and_a_reenabled_instance_goes_out_again(
    nacos, nacos_registry, settings
):
    settings.DRAIN_SECONDS = 0
    sync_registry(nacos_registry)
    row = Instance.objects.get(host="10.0.0.1")
    take_offline(row.pk, actor="olga", source="api")
    stored = nacos.instance("user-app", "10.0.0.1", 7201)
    assert stored.enabled is False
    assert stored.metadata == {"version": "V1"}  # a full update would have reset it
    sync_registry(nacos_registry)
    assert states()[("user-app", "10.0.0.1")] == "OFFLINE"  # hidden from a v1 list, not DOWN

    # A re-registration enables it again in the registry (known Nacos behaviour).
    nacos.add_instance("user-app", "10.0.0.1", 7201, metadata={"version": "V1"}, enabled=True)
    summary = sync_registry(nacos_registry)
    assert summary.reapplied == 1
    assert nacos.instance("user-app", "10.0.0.1", 7201).enabled is False
    row.refresh_from_db()
    assert row.state == "OFFLINE" and "re-applied" in row.note
    entry = AuditEntry.objects.filter(action="instance.offline.reapplied").get()
    assert entry.actor == "registry-sync" and "10.0.0.1" in entry.object


def test_draining_becomes_offline_after_the_window(nacos, nacos_registry, settings):
    settings.DRAIN_SECONDS = 30
    sync_registry(nacos_registry)
    before = timezone.now()
    row = take_offline(Instance.objects.get(host="10.0.0.2").pk, actor="olga", source="api")
    after = timezone.now()
    assert row.state == "DRAINING"
    window = timedelta(seconds=settings.DRAIN_SECONDS)
    assert before + window <= row.drain_until <= after + window
    assert draining.finish(row.pk) is False  # still inside the window
    # The window is over (the row says until when; nothing to wait for).
    Instance.objects.filter(pk=row.pk).update(drain_until=timezone.now())
    assert draining.finish(row.pk) is True
    assert Instance.objects.get(pk=row.pk).state == "OFFLINE"


def test_eureka_out_of_service_is_offline():
    with FakeEureka() as eureka:
        eureka.add_instance("USER-APP", "user-app:10.0.0.1:7201", "10.0.0.1", 7201,
                            metadata={"version": "V1"})  # fmt: skip
        eureka.add_instance("USER-APP", "user-app:10.0.0.2:7201", "10.0.0.2", 7201,
                            metadata={"version": "V2"}, status="OUT_OF_SERVICE")  # fmt: skip
        registry = Registry.objects.create(name="eureka", kind="eureka", base_url=eureka.url)
        sync_registry(registry)
        assert states() == {("user-app", "10.0.0.1"): "UP", ("user-app", "10.0.0.2"): "OFFLINE"}


def test_a_service_another_registrys_sync_created_meanwhile_does_not_fail_this_sync(
    nacos_registry,
):
    """Each registry syncs under its own lease, so two may create the same new service
    name at once; the one that commits second must not fail (and go stale) over it."""
    other = Registry.objects.create(
        name="eureka", kind=Registry.EUREKA, base_url="http://127.0.0.1:9/eureka"
    )
    Service.objects.create(name="user-app", registry=other)  # committed between read and write
    created = _create_services(["user-app", "order-app"], nacos_registry)
    assert {name: s.registry for name, s in created.items()} == {
        "user-app": other,
        "order-app": nacos_registry,
    }
    assert sync_registry(nacos_registry).added == 3
