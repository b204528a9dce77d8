"""What a browser (or anyone signed in) sends up the /ws/live/ socket is only ever a
subscription: a frame that is not one (not JSON, JSON nested far too deep, a binary frame)
gets an error message and is dropped, and the socket goes on working."""

import pytest
import pytest_asyncio
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator

from dashboard.consumers import LiveConsumer

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("db_thread_closer"),
    pytest.mark.asyncio,
]

DEEP = 100_000
BAD_FRAMES = {
    "not JSON": {"text_data": "subscribe me to user-app"},
    "truncated JSON": {"text_data": '{"subscribe": ["user-app"'},
    "nested too deep": {"text_data": "[" * DEEP + "]" * DEEP},
    "subscription nested too deep": {"text_data": '{"subscribe": ' + "[" * DEEP + "]" * DEEP + "}"},
    "binary": {"bytes_data": b'{"subscribe": ["user-app"]}'},
    "not UTF-8 binary": {"bytes_data": b"\xff\xfe\x00"},
}


@pytest_asyncio.fixture
async def socket(make_user):
    viewer = await sync_to_async(make_user)("vera", "viewer")
    communicator = WebsocketCommunicator(LiveConsumer.as_asgi(), "/ws/live/")
    communicator.scope["user"] = viewer
    connected, _ = await communicator.connect()
    assert connected
    yield communicator
    await communicator.disconnect()


async def subscribes(communicator, services: list[str]) -> None:
    await communicator.send_json_to({"subscribe": services})
    assert await communicator.receive_json_from(timeout=5) == {
        "type": "subscribed",
        "services": sorted(services),
    }


@pytest.mark.parametrize("frame", BAD_FRAMES.values(), ids=BAD_FRAMES.keys())
async def test_a_bad_frame_gets_an_error_and_the_socket_keeps_working(socket, frame):
    await socket.send_to(**frame)
    answer = await socket.receive_json_from(timeout=5)
    assert answer["type"] == "error"
    assert "subscribe" in answer["detail"]
    await subscribes(socket, ["user-app"])


async def test_many_bad_frames_in_a_row_leave_the_socket_open(socket):
    for frame in list(BAD_FRAMES.values()) * 3:
        await socket.send_to(**frame)
        assert (await socket.receive_json_from(timeout=5))["type"] == "error"
    await subscribes(socket, ["*"])
