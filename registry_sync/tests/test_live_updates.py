"""Instance changes reach browsers over the live websocket: through the configured channel
layer in process, and (with REDIS_URL, as in CI) from a real Celery worker + beat process."""

import asyncio
import os
import time

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.db import connection

from dashboard.consumers import LiveConsumer
from registry_sync.models import Registry
from registry_sync.sync import sync_registry
from testing import processes
from testing.fakes.nacos_fake import FakeNacos

pytestmark = [
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("db_thread_closer"),
]


async def connect(user) -> WebsocketCommunicator:
    communicator = WebsocketCommunicator(LiveConsumer.as_asgi(), "/ws/live/")
    communicator.scope["user"] = user
    connected, _ = await communicator.connect()
    assert connected
    return communicator


async def next_instance_event(communicator, timeout: float) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        remaining = deadline - time.monotonic()
        assert remaining > 0, "no instance event in time"
        message = await communicator.receive_json_from(timeout=remaining)
        if message["type"] == "instance":
            return message


@pytest.mark.asyncio
async def test_anonymous_and_roleless_sockets_are_refused(make_user):
    from django.contrib.auth.models import AnonymousUser

    for user in (AnonymousUser(), await sync_to_async(make_user)("nobody")):
        communicator = WebsocketCommunicator(LiveConsumer.as_asgi(), "/ws/live/")
        communicator.scope["user"] = user
        await communicator.connect()
        closed = await communicator.receive_output(timeout=2)
        assert closed == {"type": "websocket.close", "code": 4401 if user.is_anonymous else 4403}


@pytest.mark.asyncio
async def test_a_synced_change_is_pushed_to_the_browser(make_user):
    viewer = await sync_to_async(make_user)("vera", "viewer")
    with FakeNacos() as nacos:
        nacos.add_instance("user-app", "10.0.0.1", 7201, metadata={"version": "V1"})
        registry = await Registry.objects.acreate(name="nacos", kind="nacos", base_url=nacos.url)
        await sync_to_async(sync_registry)(registry)
        communicator = await connect(viewer)
        try:
            nacos.add_instance(
                "user-app", "10.0.0.1", 7201, metadata={"version": "V1"}, healthy=False
            )
            await sync_to_async(sync_registry)(registry)
            event = await next_instance_event(communicator, timeout=5)
            assert (event["service"], event["host"], event["state"]) == (
                "user-app",
                "10.0.0.1",
                "UNHEALTHY",
            )
            assert {
                "id",
                "instance_id",
                "port",
                "version",
                "healthy",
                "weight",
                "last_seen",
            } <= set(event)
        finally:
            await communicator.disconnect()


@pytest.mark.asyncio
@pytest.mark.skipif(
    not os.environ.get("REDIS_URL"),
    reason="needs REDIS_URL: a worker process reaches browsers only through Redis (CI sets it)",
)
async def test_a_real_worker_syncs_and_the_change_arrives_within_one_interval(make_user, tmp_path):
    interval = 2.0
    viewer = await sync_to_async(make_user)("vera", "viewer")
    with FakeNacos() as nacos:
        nacos.add_instance("user-app", "10.0.0.1", 7201, metadata={"version": "V1"})
        await Registry.objects.acreate(
            name="nacos", kind="nacos", base_url=nacos.url, sync_interval=interval
        )
        env = processes.django_env(
            processes.database_url(connection.settings_dict),
            GRAYLANE_VAR_DIR=str(tmp_path),  # the beat schedule file
            LOG_LEVEL="INFO",
        )
        worker = processes.CeleryWorker({**env}, pool="solo", concurrency=1, beat=True)
        await sync_to_async(worker.start)()
        communicator = await connect(viewer)
        try:
            first = await next_instance_event(communicator, timeout=30)  # the worker is up
            assert first["state"] == "UP"
            await asyncio.sleep(0.2)
            nacos.add_instance("user-app", "10.0.0.2", 7201, metadata={"version": "V2"})
            changed_at = time.monotonic()
            event = await next_instance_event(communicator, timeout=10 * (interval + 1.0) + 5)
            took = time.monotonic() - changed_at
            assert event["host"] == "10.0.0.2" and event["version"] == "V2"
            # One interval, plus the one-second granularity of the beat dispatcher: bounded at
            # ten times that, as a loaded machine's worker may be late (it failed at 1 x).
            assert took <= 10 * (interval + 1.0), (took, worker.log())
        finally:
            await communicator.disconnect()
            await sync_to_async(worker.stop)()
