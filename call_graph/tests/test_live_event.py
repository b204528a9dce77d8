"""Recorded calls reach the pages over /ws/live/ as a `call_edges` message naming the services
that made or took them: what the overview's service graph redraws on."""

import time

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator

from dashboard.consumers import LiveConsumer

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("db_thread_closer"),
]


def sample(caller, callee):
    return {"caller": caller, "caller_version": "V1", "callee": callee, "callee_version": "V1",
            "lane": None, "ts": int(time.time()), "total": 3, "errors": 0}  # fmt: skip


@pytest.mark.asyncio
async def test_recorded_calls_are_announced_to_the_page(make_user, api):
    viewer = await sync_to_async(make_user)("vera", "viewer")
    fleet = await sync_to_async(api)("service", "fleet")
    communicator = WebsocketCommunicator(LiveConsumer.as_asgi(), "/ws/live/")
    communicator.scope["user"] = viewer
    assert (await communicator.connect())[0]
    try:
        refused = await sync_to_async(fleet.post)(
            "/api/v1/call-edges/", {"samples": [{**sample("a-app", "b-app"), "total": -1}]},
            format="json",
        )  # fmt: skip
        assert refused.status_code == 400
        answer = await sync_to_async(fleet.post)(
            "/api/v1/call-edges/",
            {"samples": [sample("user-app", "order-app"), sample("order-app", "pay-app")]},
            format="json",
        )
        assert answer.status_code == 202
        # The first message: the refused report announced nothing.
        message = await communicator.receive_json_from(timeout=5)
        assert message == {"type": "call_edges", "services": ["order-app", "pay-app", "user-app"]}
    finally:
        await communicator.disconnect()
