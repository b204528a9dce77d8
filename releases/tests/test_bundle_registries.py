"""A release bundle whose services come from different registries: order-app from a Consul
registry (the Consul contract fake over loopback HTTP), user-app from the embedded (Nacos)
registry. It starts and advances as one, as a bundle of one registry does."""

import time

import pytest

from embedded_registry import naming
from gateways.gateway_document import build_document
from policy.publishing import load_state
from policy.services import update_policy
from registry_sync.models import Instance, Registry
from registry_sync.sync import sync_registry
from releases import services
from releases.models import Release
from testing.fakes.consul_fake import FakeConsul

pytestmark = pytest.mark.django_db

INTERVAL = 5


@pytest.fixture
def two_registries(db):
    load_state()
    update_policy({"enabled": True, "routing": True, "users": ["1001"]}, partial=True,
                  actor="setup", source="api", expected_revision=None)  # fmt: skip
    with FakeConsul() as consul:
        consul.register("order-app", "10.0.1.1", 7301, service_id="order-1", meta={"version": "V1"})
        consul.register("order-app", "10.0.1.2", 7301, service_id="order-2", meta={"version": "V2"})
        from_consul = Registry.objects.create(name="consul", kind="consul", base_url=consul.url)
        sync_registry(from_consul)
        embedded, _ = Registry.objects.get_or_create(name="embedded", kind=Registry.EMBEDDED)
        for n, version in enumerate(("V1", "V2")):
            key = naming.InstanceKey("public", "DEFAULT_GROUP", "user-app", "DEFAULT",
                                     f"10.0.0.{n + 1}", 7201)  # fmt: skip
            naming.register(key, actor="fleet", weight=1.0, healthy=True, enabled=True,
                            ephemeral=True, metadata={"version": version})  # fmt: skip
        sync_registry(embedded)
        yield


def routing(service):
    doc = build_document(1)["services"][service]
    return doc["prod"], doc.get("percent"), doc.get("targeted")


def test_a_bundle_spanning_a_consul_and_an_embedded_registry_starts_and_advances(
    two_registries, api, record
):
    origin = dict(
        Instance.objects.values_list("service__name", "service__registry__kind").distinct()
    )
    assert origin == {"order-app": "consul", "user-app": "embedded"}
    client = api("operator", "olga")
    created = client.post(
        "/api/v1/release-bundles/",
        {
            "name": "checkout",
            "releases": [
                {"service": "order-app", "to_version": "V2"},
                {"service": "user-app", "to_version": "V2"},
            ],
            "steps": [{"targeted": True}, {"percent": 20}, {"percent": 100}],
            "analysis": {"interval_s": INTERVAL, "min_requests": 50},
        },
        format="json",
    )
    assert created.status_code == 201, created.json()
    bundle_id = created.json()["id"]
    started = client.post(f"/api/v1/release-bundles/{bundle_id}/start/").json()
    assert started["state"] == "running"
    assert routing("order-app") == routing("user-app") == ("V1", 0, True)

    t0 = int(time.time()) - 60
    Release.objects.update(analysed_until=t0)
    for service in ("order-app", "user-app"):
        record("V2", t0, INTERVAL, 100, 0, service=service)
        record("V1", t0, INTERVAL, 100, 0, service=service)
    services.analyse_due(now=t0 + INTERVAL + services.REPORT_LAG_SECONDS)
    assert [r.step for r in Release.objects.order_by("position")] == [1, 1]
    assert routing("order-app")[1] == routing("user-app")[1] == 20
