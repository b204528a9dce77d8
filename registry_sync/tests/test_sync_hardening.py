"""One bad entry never freezes a registry's sync, and a sync that fails for any reason
(the database included) changes no instance and recovers on the next run.

Against the contract fakes of Nacos (1.x, 2.x, 3.x) and Eureka over loopback HTTP. The fakes
refuse malformed registrations as the real servers do, so the malformed entries a broken
client, proxy or server version could still produce are written into the fakes' stores
directly (``corrupt_*`` below)."""

import pytest
from django.db import connection
from django.utils import timezone

from embedded_registry.models import EmbeddedInstance
from registry_sync.adapters import NacosAdapter, RegistryInstance, SkippedInstance
from registry_sync.models import Instance, Registry, Service
from registry_sync.sync import SyncFailed, sync_registry
from registry_sync.tasks import sync_one
from testing.fakes.eureka_fake import FakeEureka
from testing.fakes.nacos_fake import FakeNacos

pytestmark = pytest.mark.django_db

FIELDS = ("instance_id", "host", "port", "version", "state", "healthy", "enabled", "weight",
          "metadata", "note", "last_seen")  # fmt: skip


def rows() -> dict:
    """Every stored instance, every field the sync writes."""
    return {
        (row.service.name, row.instance_id): tuple(getattr(row, f) for f in FIELDS)
        for row in Instance.objects.select_related("service")
    }


def corrupt_nacos(fake: FakeNacos, service: str, ip: str, port: int, /, **raw) -> None:
    """Make the fake serve these raw values for one stored instance."""
    with fake.lock:
        record = fake.services[("public", "DEFAULT_GROUP", service)][(ip, port, "DEFAULT")]
        for name, value in raw.items():
            setattr(record, name, value)


def test_bad_nacos_entries_are_skipped_and_reported_and_the_good_ones_synced(nacos, nacos_registry):
    bad = {
        "10.0.0.11": {"port": "abc"},
        "10.0.0.12": {"port": None},
        "10.0.0.13": {"weight": "NaN"},
        "10.0.0.14": {"ip": None},
        "10.0.0.15": {"metadata": {f"key{n}": "x" * 1000 for n in range(20)}},
        "10.0.0.16": {"port": 70000},
        "10.0.0.17": {"metadata": {"version": "V1\x00"}},
    }
    for ip, raw in bad.items():
        nacos.add_instance("user-app", ip, 7201)
        corrupt_nacos(nacos, "user-app", ip, 7201, **raw)
    nacos.add_instance("bad/name", "10.0.2.1", 7401)

    summary = sync_registry(nacos_registry)

    assert {(r.service.name, r.host) for r in Instance.objects.select_related("service")} == {
        ("user-app", "10.0.0.1"), ("user-app", "10.0.0.2"), ("order-app", "10.0.1.1"),
    }  # fmt: skip
    assert not Service.objects.filter(name="bad/name").exists()
    assert len(summary.skipped) == len(bad) + 1
    nacos_registry.refresh_from_db()
    assert not nacos_registry.stale
    assert nacos_registry.skipped_instances == len(bad) + 1
    error = nacos_registry.last_error
    assert error.startswith("Skipped 8 invalid instances (the others synced): ")
    for reason in [
        "port 'abc' is not a whole number",
        "port is missing",
        "weight nan is not a number from 0 to 10000",
        "ip is missing",
        "metadata is 20211 bytes as JSON (at most 16384)",
        "port 70000 is not between 1 and 65535",
        "contains a NUL byte",
        "'bad/name': service name 'bad/name' is not",
    ]:
        assert reason in error
    assert "10.0.0.11#abc#DEFAULT#DEFAULT_GROUP@@user-app" in error  # which instance


def test_the_adapters_list_a_bad_entry_as_skipped_instead_of_failing_the_listing(nacos):
    nacos.add_instance("user-app", "10.0.0.11", 7201)
    corrupt_nacos(nacos, "user-app", "10.0.0.11", 7201, port="abc")
    with NacosAdapter(nacos.url) as adapter:
        listed = adapter.list_instances("user-app")
    assert sorted(i.host for i in listed if isinstance(i, RegistryInstance)) == [
        "10.0.0.1", "10.0.0.2",
    ]  # fmt: skip
    assert [i for i in listed if isinstance(i, SkippedInstance)] == [
        SkippedInstance(
            "user-app",
            "10.0.0.11#abc#DEFAULT#DEFAULT_GROUP@@user-app",
            "port 'abc' is not a whole number",
        )
    ]


def test_a_stored_instance_that_turns_bad_is_left_as_it_was_until_it_is_good_again(
    nacos, nacos_registry
):
    sync_registry(nacos_registry)
    before = rows()
    corrupt_nacos(nacos, "user-app", "10.0.0.2", 7201, weight="NaN", metadata={"version": "V9"})
    nacos.remove_instance("order-app", "10.0.1.1", 7301)

    summary = sync_registry(nacos_registry)

    assert summary.gone == 1  # order-app really left
    after = rows()
    key = ("user-app", "10.0.0.2#7201#DEFAULT#DEFAULT_GROUP@@user-app")
    assert after[key] == before[key]  # not DOWN, not V9: unchanged
    assert after[key][FIELDS.index("state")] == "UP"
    nacos_registry.refresh_from_db()
    assert (nacos_registry.stale, nacos_registry.skipped_instances) == (False, 1)

    corrupt_nacos(nacos, "user-app", "10.0.0.2", 7201, weight=2.0)
    sync_registry(nacos_registry)
    nacos_registry.refresh_from_db()
    assert (nacos_registry.skipped_instances, nacos_registry.last_error) == (0, "")
    row = Instance.objects.get(host="10.0.0.2")
    assert (row.version, row.weight, row.state) == ("V9", 2.0, "UP")


def corrupt_eureka(fake: FakeEureka, app: str, instance_id: str, **raw) -> None:
    """Make the fake serve these raw values (a value of None drops the field)."""
    with fake.lock:
        body = fake.apps[app.upper()][instance_id]
        for name, value in raw.items():
            if value is None:
                body.pop(name, None)
            else:
                body[name] = value


def test_bad_eureka_entries_are_skipped_and_reported_and_the_good_ones_synced():
    with FakeEureka() as eureka:
        eureka.add_instance("USER-APP", "user-app:10.0.0.1:7201", "10.0.0.1", 7201,
                            metadata={"version": "V1"})  # fmt: skip
        for n, raw in enumerate(
            [
                {"port": None},  # no port at all
                {"port": {"$": "abc", "@enabled": "true"}},
                {"ipAddr": None, "hostName": None},
                {"metadata": {"weight": "NaN"}},
                {"metadata": {"weight": "inf"}},
                {"metadata": [1, 2]},
            ],
            start=2,
        ):
            instance_id = f"user-app:10.0.0.{n}:7201"
            eureka.add_instance("USER-APP", instance_id, f"10.0.0.{n}", 7201)
            corrupt_eureka(eureka, "USER-APP", instance_id, **raw)
        eureka.add_instance("USER-APP", "user app/../x", "10.0.0.9", 7201)
        registry = Registry.objects.create(name="eureka", kind="eureka", base_url=eureka.url)

        summary = sync_registry(registry)

    assert [r.host for r in Instance.objects.all()] == ["10.0.0.1"]
    assert len(summary.skipped) == 7
    registry.refresh_from_db()
    assert (registry.stale, registry.skipped_instances) == (False, 7)
    for reason in [
        "'user-app:10.0.0.2:7201': field 'port' is missing",
        "'user-app:10.0.0.3:7201': port 'abc' is not a whole number",
        "'user-app:10.0.0.4:7201': field 'hostName' is missing",
        "'user-app:10.0.0.5:7201': weight nan is not a number",
        "'user-app:10.0.0.6:7201': weight inf is not a number",
        "'user-app:10.0.0.7:7201': metadata is list, not an object",
        "instance id 'user app/../x' is not",
    ]:
        assert reason in registry.last_error


def test_an_entry_without_a_readable_id_keeps_its_service_rows_as_they_were():
    with FakeEureka() as eureka:
        for n in (1, 2):
            eureka.add_instance("USER-APP", f"user-app:10.0.0.{n}:7201", f"10.0.0.{n}", 7201)
        registry = Registry.objects.create(name="eureka", kind="eureka", base_url=eureka.url)
        sync_registry(registry)
        before = rows()
        eureka.remove_instance("USER-APP", "user-app:10.0.0.2:7201")
        eureka.add_instance("USER-APP", "user-app:10.0.0.9:7201", "10.0.0.9", 7201)
        # Neither instanceId nor hostName: this entry could be 10.0.0.2 for all we know.
        corrupt_eureka(eureka, "USER-APP", "user-app:10.0.0.9:7201", instanceId=None,
                       hostName=None, ipAddr=None)  # fmt: skip
        sync_registry(registry)
        assert rows() == before
        eureka.remove_instance("USER-APP", "user-app:10.0.0.9:7201")
        sync_registry(registry)
        assert Instance.objects.get(host="10.0.0.2").state == "DOWN"  # now it is known gone


def test_bad_rows_of_the_embedded_registry_are_skipped():
    registry = Registry.objects.create(name="embedded-test", kind="embedded")
    now = timezone.now()
    for service, ip, weight in [
        ("user-app", "10.0.0.1", 1.0),
        ("user-app", "not a host", 1.0),
        ("user-app", "10.0.0.3", 20000.0),
        ("a/b", "10.0.0.4", 1.0),
    ]:
        EmbeddedInstance.objects.create(
            service=service, ip=ip, port=7201, weight=weight, last_beat=now
        )
    sync_registry(registry)
    assert [r.host for r in Instance.objects.all()] == ["10.0.0.1"]
    assert not Service.objects.filter(name="a/b").exists()
    registry.refresh_from_db()
    assert registry.skipped_instances == 3
    assert "host 'not a host' is not an IP address or host name" in registry.last_error
    assert "weight 20000.0 is not a number from 0 to 10000" in registry.last_error


# -- a failing database ------------------------------------------------------------------------


def refuse_instance_updates() -> None:
    """A real failure of the database in the write phase: a trigger that refuses every
    UPDATE of an instance row (SQLite or PostgreSQL, whichever the tests run on)."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "CREATE FUNCTION test_refuse_update() RETURNS trigger LANGUAGE plpgsql AS "
                "$$ BEGIN RAISE EXCEPTION 'refused by a test trigger'; END $$"
            )
            cursor.execute(
                "CREATE TRIGGER test_refuse_update BEFORE UPDATE ON registry_sync_instance "
                "FOR EACH ROW EXECUTE FUNCTION test_refuse_update()"
            )
        else:
            cursor.execute(
                "CREATE TRIGGER test_refuse_update BEFORE UPDATE ON registry_sync_instance "
                "BEGIN SELECT RAISE(ABORT, 'refused by a test trigger'); END"
            )


def allow_instance_updates() -> None:
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("DROP TRIGGER test_refuse_update ON registry_sync_instance")
            cursor.execute("DROP FUNCTION test_refuse_update()")
        else:
            cursor.execute("DROP TRIGGER test_refuse_update")


def test_a_database_error_marks_stale_changes_no_instance_and_the_next_run_recovers():
    with FakeNacos(version="2.x") as nacos:
        nacos.add_instance("user-app", "10.0.0.1", 7201, metadata={"version": "V1"})
        nacos.add_instance("user-app", "10.0.0.2", 7201, metadata={"version": "V2"})
        registry = Registry.objects.create(name="nacos", kind="nacos", base_url=nacos.url)
        sync_registry(registry)
        before = rows()
        # A new instance (an INSERT, which works) and a changed one (an UPDATE, refused):
        nacos.add_instance("user-app", "10.0.0.3", 7201, metadata={"version": "V2"})
        nacos.add_instance("user-app", "10.0.0.2", 7201, metadata={"version": "V3"})
        refuse_instance_updates()

        with pytest.raises(SyncFailed, match="refused by a test trigger"):
            sync_registry(registry)
        registry.refresh_from_db()
        assert registry.stale
        assert "refused by a test trigger" in registry.last_error
        assert rows() == before  # the INSERT was rolled back with the rest

        sync_one(registry.pk)  # what beat runs: the failure is recorded, not raised
        registry.refresh_from_db()
        assert registry.stale and registry.lease_until is None

        allow_instance_updates()
        sync_one(registry.pk)
        registry.refresh_from_db()
        assert (registry.stale, registry.last_error) == (False, "")
        assert {r.host: r.version for r in Instance.objects.all()} == {
            "10.0.0.1": "V1", "10.0.0.2": "V3", "10.0.0.3": "V2",
        }  # fmt: skip


def test_a_registry_that_cannot_even_be_configured_is_marked_stale():
    registry = Registry.objects.create(name="nacos", kind="nacos", base_url="")
    with pytest.raises(SyncFailed, match="base_url"):
        sync_registry(registry)
    registry.refresh_from_db()
    assert registry.stale and "Nacos base_url must look like" in registry.last_error
    sync_one(registry.pk)  # recorded again, not raised
