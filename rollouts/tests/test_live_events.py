"""Release events reach the pages over /ws/live/ as `release` messages."""

import time

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator

from dashboard.consumers import LiveConsumer
from rollouts import services
from rollouts.tests.conftest import STEPS

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("db_thread_closer"),
]


def make_and_start() -> int:
    release = services.create_release(
        service="user-app",
        to_version="V2",
        from_version=None,
        steps=STEPS,
        analysis_settings={
            "interval_s": 5,
            "min_requests": 10,
            "max_error_rate_increase": 1.0,
            "failures_tolerated": 1,
            "max_p95_ms": None,
            "deadline_s": 60,
        },
        actor="olga",
        source="api",
    )
    services.act(release.pk, "start", actor="olga", source="api")
    return release.pk


@pytest.mark.asyncio
async def test_a_started_release_is_pushed_to_the_page(make_user, fleet):
    viewer = await sync_to_async(make_user)("vera", "viewer")
    communicator = WebsocketCommunicator(LiveConsumer.as_asgi(), "/ws/live/")
    communicator.scope["user"] = viewer
    assert (await communicator.connect())[0]
    try:
        release_id = await sync_to_async(make_and_start)()
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
