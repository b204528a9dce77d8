"""Ingested samples reach the /ws/live/ clients that subscribed to their service, through
the configured channel layer (Redis with REDIS_URL, as in CI), from either backend of the
live windows; other clients see nothing, and a client that cannot keep up is dropped
without holding up the others."""

import asyncio
import time

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator

import events
from dashboard.consumers import TOO_SLOW, LiveConsumer
from metrics import services
from metrics.tests.conftest import post, sample

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("db_thread_closer"),
    pytest.mark.asyncio,
]


async def connect(user, subscribe: list[str] | None = None, app=None) -> WebsocketCommunicator:
    communicator = WebsocketCommunicator(app or LiveConsumer.as_asgi(), "/ws/live/")
    communicator.scope["user"] = user
    connected, _ = await communicator.connect()
    assert connected
    if subscribe is not None:
        await communicator.send_json_to({"subscribe": subscribe})
        assert await communicator.receive_json_from(timeout=5) == {
            "type": "subscribed",
            "services": sorted(subscribe),
        }
    return communicator


async def next_of_type(communicator, kind: str, timeout: float = 5) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        remaining = deadline - time.monotonic()
        assert remaining > 0, f"no {kind} message in time"
        message = await communicator.receive_json_from(timeout=remaining)
        if message["type"] == kind:
            return message


async def next_but_gateways(communicator, timeout: float = 5) -> dict | None:
    """The next message that is not a gateway's status (the generation the `gateway` fixture
    made announces every gateway to every page), or None if none comes within `timeout`."""
    deadline = time.monotonic() + timeout
    while (remaining := deadline - time.monotonic()) > 0:
        if await communicator.receive_nothing(timeout=remaining):
            return None
        message = await communicator.receive_json_from()
        if message["type"] != "gateway":
            return message
    return None


async def test_a_subscriber_sees_the_new_success_rate_and_others_see_nothing(
    windows, gateway, make_user
):
    name, client = gateway
    viewer = await sync_to_async(make_user)("vera", "viewer")
    watching = await connect(viewer, ["user-app"])
    elsewhere = await connect(viewer, ["order-app"])
    everything = await connect(viewer, ["*"])
    try:
        now = int(time.time())
        response = await sync_to_async(post)(
            client,
            name,
            sample(now - 1, version="V1", total=200, errors=0, p95=10.0),
            sample(now - 1, version="V2", total=100, errors=7, p95=50.0),
        )
        assert response.status_code == 202
        assert await sync_to_async(services.publish_live)(now) == 2
        got = {}
        for _ in range(2):
            message = await next_of_type(watching, "metrics")
            got[message["version"]] = message
        v2 = got["V2"]
        assert (v2["service"], v2["ts"], v2["total"], v2["errors"]) == ("user-app", now, 100, 7)
        assert v2["success_rate"] == 93.0 and got["V1"]["success_rate"] == 100.0
        assert v2["windows"]["5m"]["total"] == 100 and v2["windows"]["10s"]["rate_per_s"] == 10
        assert 50.0 <= v2["latency_ms_p95"] <= 50 * 1.19
        assert {(await next_of_type(everything, "metrics"))["version"] for _ in range(2)} == {
            "V1",
            "V2",
        }
        assert await next_but_gateways(elsewhere, timeout=0.5) is None
    finally:
        for communicator in (watching, elsewhere, everything):
            await communicator.disconnect()


async def test_without_a_subscription_no_metrics_but_the_other_events(windows, gateway, make_user):
    name, client = gateway
    viewer = await sync_to_async(make_user)("vera", "viewer")
    plain = await connect(viewer)
    try:
        now = int(time.time())
        await sync_to_async(post)(client, name, sample(now, total=5))
        await sync_to_async(services.publish_live)(now)
        await sync_to_async(events.publish)(events.RegistryChanged(registry="reg", changed=200))
        assert (await next_but_gateways(plain))["type"] == "registry"
    finally:
        await plain.disconnect()


async def test_unsubscribing_stops_the_metrics(windows, gateway, make_user):
    name, client = gateway
    viewer = await sync_to_async(make_user)("vera", "viewer")
    communicator = await connect(viewer, ["user-app"])
    try:
        await unsubscribe_all(communicator)
        now = int(time.time())
        await sync_to_async(post)(client, name, sample(now, total=5))
        await sync_to_async(services.publish_live)(now)
        assert await next_but_gateways(communicator, timeout=0.5) is None
    finally:
        await communicator.disconnect()


async def unsubscribe_all(communicator) -> None:
    await communicator.send_json_to({"subscribe": []})
    assert await communicator.receive_json_from(timeout=5) == {"type": "subscribed", "services": []}


@pytest.mark.parametrize(
    "message", [{"subscribe": "user-app"}, {"subscribe": [1]}, {"hello": 1}, ["user-app"]]
)
async def test_a_bad_subscription_is_answered_with_an_error(make_user, message):
    viewer = await sync_to_async(make_user)("vera", "viewer")
    communicator = await connect(viewer)
    try:
        await communicator.send_json_to(message)
        answer = await communicator.receive_json_from(timeout=5)
        assert answer["type"] == "error" and "subscribe" in answer["detail"]
    finally:
        await communicator.disconnect()


def never_writing(app):
    """The consumer app behind a socket whose client stopped reading: the server's sends
    of messages never complete (its TCP window stays full); closing still gets through."""

    async def wrapped(scope, receive, send):
        async def stuck_send(message):
            if message["type"] == "websocket.send":
                await asyncio.Event().wait()
            await send(message)

        return await app(scope, receive, stuck_send)

    return wrapped


async def test_a_client_that_cannot_keep_up_is_dropped_and_the_others_get_everything(
    make_user, settings
):
    settings.LIVE_CLIENT_QUEUE = 5
    viewer = await sync_to_async(make_user)("vera", "viewer")
    fast = await connect(viewer)
    slow = await connect(viewer, app=never_writing(LiveConsumer.as_asgi()))
    try:
        sent = 20
        for n in range(sent):
            await sync_to_async(events.publish)(events.RegistryChanged(registry="reg", changed=n))
        got = [(await fast.receive_json_from(timeout=5))["changed"] for _ in range(sent)]
        assert got == list(range(sent))
        closed = await slow.receive_output(timeout=5)
        assert closed == {"type": "websocket.close", "code": TOO_SLOW}
    finally:
        await fast.disconnect()
        await slow.disconnect()
