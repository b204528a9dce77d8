"""The generation counter, the gateway document, the banner, the page and its live events."""

import asyncio
import json
import threading
from datetime import timedelta

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from channels.layers import get_channel_layer
from django.apps import apps
from django.db import connection
from django.utils import timezone
from rest_framework.test import APIClient

import events
from gateways import generation, status_updates
from gateways.models import Generation
from policy.documents import with_override
from policy.publishing import publish
from registry_sync.models import Instance, Service
from registry_sync.signals import routable_instances_changed
from routing_engine import canonical_json, checksum

pytestmark = pytest.mark.django_db


def document() -> dict:
    return json.loads(generation.current().body)


def test_a_policy_revision_makes_a_new_generation(api, django_capture_on_commit_callbacks):
    before = generation.newest_number()
    with django_capture_on_commit_callbacks(execute=True):
        response = api("operator").patch("/api/v1/policy/", {"percent": 12}, format="json")
    assert response.status_code == 200
    doc = document()
    assert doc["generation"] == before + 1
    assert doc["revision"] == response.json()["revision"]
    assert doc["gray"]["percent"] == 12
    assert "versions" not in doc["gray"], "gray is the policy without its versions"
    rest = {key: doc[key] for key in ("gray", "versions", "services")}
    assert doc["checksum"] == checksum(rest)
    assert set(doc) == {"generation", "revision", "checksum", "gray", "versions", "services"}


@pytest.fixture
def gateways_listening():
    # registry_sync's tests clear every receiver of routable_instances_changed when they
    # are done; connect ours again (GatewaysConfig.ready is idempotent: dispatch_uid).
    apps.get_app_config("gateways").ready()


def test_a_change_of_routable_instances_makes_a_new_generation(
    gateways_listening, django_capture_on_commit_callbacks
):
    user_app = Service.objects.create(name="user-app")
    Service.objects.create(name="order-app")
    for n, (state, version) in enumerate([("UP", "V1"), ("UP", "V2"), ("DRAINING", "V1")]):
        Instance.objects.create(
            service=user_app,
            instance_id=f"10.0.0.{n}#7201#DEFAULT#user-app",
            host=f"10.0.0.{n}",
            port=7201,
            version=version,
            state=state,
            weight=2.0 if n else 1.0,
        )
    with django_capture_on_commit_callbacks(execute=True):
        publish(
            lambda doc: with_override(doc, "pay-app", {"gray": "V9"}),
            actor="test",
            source="api",
            action="service.versions",
            object_label="service pay-app",
            audit_view=lambda doc: {},
        )
    before = generation.newest_number()
    routable_instances_changed.send(sender=Instance, services={"user-app"})
    doc = document()
    assert doc["generation"] == before + 1
    services = doc["services"]
    assert services["user-app"]["instances"] == [
        {"id": "10.0.0.0#7201#DEFAULT#user-app", "host": "10.0.0.0", "port": 7201,
         "version": "V1", "weight": 1.0},
        {"id": "10.0.0.1#7201#DEFAULT#user-app", "host": "10.0.0.1", "port": 7201,
         "version": "V2", "weight": 2.0},
    ], "only UP instances are routable"  # fmt: skip
    assert (services["user-app"]["prod"], services["user-app"]["gray"]) == ("V1", "V2")
    assert services["order-app"]["instances"] == [], "known services without instances too"
    assert services["pay-app"] == {"prod": "V1", "gray": "V9", "instances": []}, (
        "a service with an override but no registry entry is listed"
    )


def test_the_document_is_built_once_per_generation(monkeypatch):
    generation.bump("test")
    first = generation.current()
    monkeypatch.setattr(generation, "build_document", lambda number: pytest.fail("rebuilt"))
    assert generation.current() is first
    assert json.loads(first.body)["generation"] == first.number
    assert first.body == canonical_json(json.loads(first.body)).encode()


def test_only_the_newest_generation_keeps_its_content():
    generation.bump("one")
    newest = generation.bump("two")
    assert Generation.objects.exclude(content="").get().number == newest


@pytest.mark.django_db(transaction=True)
def test_concurrent_bumps_give_distinct_growing_numbers():
    start = generation.newest_number()
    numbers, errors = [], []
    barrier = threading.Barrier(8)

    def bump():
        try:
            barrier.wait()
            numbers.append(generation.bump("race"))
        except Exception as exc:  # reported below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=bump) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert not errors
    assert sorted(numbers) == list(range(start + 1, start + 9))


def test_gateways_behind_for_long_are_counted_and_shown_on_every_page(
    make_gateway, make_user, settings
):
    settings.GATEWAY_BEHIND_BANNER_SECONDS = 30
    long_ago = timezone.now() - timedelta(minutes=5)
    old = generation.bump("old")
    Generation.objects.filter(number=old).update(created_at=long_ago)
    fresh = generation.bump("fresh")
    behind, _, _ = make_gateway("behind")
    in_sync, _, _ = make_gateway("in-sync", acked_generation=fresh)
    just_behind, _, _ = make_gateway("just-behind", acked_generation=old)
    young, _, _ = make_gateway("young")
    from gateways.models import Gateway

    Gateway.objects.exclude(pk=young.pk).update(created_at=long_ago)
    # Only "behind" missed a generation that is more than 30 s old; the others are in sync,
    # behind by less than 30 s, or too young to tell.
    assert generation.behind_for_longer_than(30) == 1
    client = APIClient()
    client.force_login(make_user("vera", "viewer"))
    page = client.get("/")
    assert b'id="gateways-behind"' in page.content
    assert b"1 gateway behind" in page.content
    Gateway.objects.filter(pk=behind.pk).update(acked_generation=fresh)
    assert b'id="gateways-behind"' not in client.get("/").content


def test_the_gateways_page_lists_status_and_generations(make_gateway, make_user):
    make_gateway("edge-1", "push", "http://127.0.0.1:9/", last_error="HTTP 503", attempts=4)
    make_gateway("edge-2", acked_generation=generation.newest_number(), last_seen=timezone.now())
    client = APIClient()
    client.force_login(make_user("vera", "viewer"))
    page = client.get("/gateways/")
    assert page.status_code == 200
    html = page.content.decode()
    assert 'data-gateway="edge-1"' in html and 'data-gateway="edge-2"' in html
    assert "failing" in html and "in_sync" in html and "HTTP 503" in html
    assert 'href="/gateways/"' in html, "the navigation links the page"
    assert APIClient().get("/gateways/").status_code == 302, "log in first"


@pytest.mark.django_db(transaction=True)  # the events are sent from their own thread
def test_an_ack_is_broadcast_on_the_live_stream(make_gateway):
    _, token, _ = make_gateway("edge")
    number = generation.newest_number()
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")

    async def listen_while_acking() -> dict:
        layer = get_channel_layer()
        channel = await layer.new_channel()
        await layer.group_add(events.GROUP, channel)
        try:
            response = await sync_to_async(client.post)(
                "/api/v1/gateways/edge/ack/", {"generation": number}, format="json"
            )
            assert response.status_code == 200, response.content
            # An earlier status of this gateway may still be on its way; the page ends up
            # showing the ack.
            async with asyncio.timeout(5):
                while True:
                    event = (await layer.receive(channel))["event"]
                    if event["type"] == "gateway" and event["status"] == "in_sync":
                        return event
        finally:
            await layer.group_discard(events.GROUP, channel)

    event = async_to_sync(listen_while_acking)()
    assert event["name"] == "edge"
    assert event["acked_generation"] == event["desired_generation"] == number


@pytest.mark.django_db(transaction=True)  # sending closes the thread's old connections
def test_gateway_status_is_read_and_sent_only_while_a_page_listens(
    make_gateway, settings, django_assert_num_queries
):
    # The in-process layer (the default without Redis), which can tell who listens.
    in_process = "events.channel_layers.InProcessChannelLayer"
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": in_process}}
    make_gateway("edge")
    generation.newest_number()
    with django_assert_num_queries(0):
        status_updates._send(None)  # no page open: nothing to read, build or send

    async def listen() -> dict:
        layer = get_channel_layer()
        channel = await layer.new_channel()
        await layer.group_add(events.GROUP, channel)
        try:
            await sync_to_async(status_updates._send)(None)
            async with asyncio.timeout(5):
                return (await layer.receive(channel))["event"]
        finally:
            await layer.group_discard(events.GROUP, channel)

    event = async_to_sync(listen)()
    assert (event["type"], event["name"], event["status"]) == ("gateway", "edge", "pending")


def test_the_document_carries_nothing_a_gateway_would_skip(caplog):
    """Rows stored before the sync checked what it stores (or edited by hand) are left out
    of the document, and logged; an instance without a version is sent as null."""
    service = Service.objects.create(name="user-app")
    legacy = Service.objects.create(name="legacy/name")
    rows = {
        "good": {"host": "10.0.0.1", "port": 7201, "version": "V1"},
        "bare": {"host": "10.0.0.2", "port": 7201, "version": None},
        "blank": {"host": "10.0.0.3", "port": 7201, "version": "  "},
        "port 0": {"host": "10.0.0.4", "port": 0, "version": "V1"},
        "no host": {"host": "", "port": 7201, "version": "V1"},
        "weight": {"host": "10.0.0.5", "port": 7201, "version": "V1", "weight": -1.0},
    }
    for instance_id, fields in rows.items():
        Instance.objects.create(service=service, instance_id=instance_id, state="UP", **fields)
    Instance.objects.create(
        service=legacy, instance_id="x", host="10.0.0.9", port=1, version="V1", state="UP"
    )
    document = json.loads(generation.current().body)
    assert set(document["services"]) == {"user-app"}
    assert {i["id"]: i["version"] for i in document["services"]["user-app"]["instances"]} == {
        "good": "V1",
        "bare": None,
        "blank": None,
    }
    logged = caplog.text
    assert "leaves out instance port 0 of user-app: port: 0 is not a port" in logged
    assert "leaves out service 'legacy/name'" in logged
