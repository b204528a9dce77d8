"""Release events reach the pages over /ws/live/ as `release` messages."""

import time

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator

from dashboard.consumers import LiveConsumer
from releases.tests.conftest import started_release

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("db_thread_closer"),
]


@pytest.mark.asyncio
async def test_a_started_release_is_pushed_to_the_page(make_user, fleet):
    viewer = await sync_to_async(make_user)("vera", "viewer")
    communicator = WebsocketCommunicator(LiveConsumer.as_asgi(), "/ws/live/")
    communicator.scope["user"] = viewer
    assert (await communicator.connect())[0]
    try:
        release_id = (await sync_to_async(started_release)()).pk
        deadline = time.monotonic() + 5
        seen = []
        while "started" not in seen:
            message = await communicator.receive_json_from(timeout=deadline - time.monotonic())
            if message["type"] == "release":
                assert message["release"]["id"] == release_id
                seen.append(message["event"]["kind"])
        assert seen == ["created", "started"]
        assert message["release"]["state"] == "running"
        assert set(message["event"]) == {"at", "kind", "step", "detail"}
    finally:
        await communicator.disconnect()
