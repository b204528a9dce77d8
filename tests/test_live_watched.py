"""Whether anyone watches the live stream, on Redis's channel layer: a page open on any
replica counts, and with none open the gateways' status messages (one per gateway on every
new generation) are not built at all."""

import asyncio
import time

import pytest
from channels.layers import get_channel_layer
from channels_redis.pubsub import RedisPubSubChannelLayer
from django.conf import settings

import events

pytestmark = pytest.mark.skipif(
    not settings.REDIS_URL, reason="needs REDIS_URL (CI sets it): the Redis channel layer"
)


def _becomes(expected: bool, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while events.watched() is not expected and time.monotonic() < deadline:
        time.sleep(0.02)
    return events.watched() is expected


def test_a_page_subscribed_on_redis_makes_the_stream_watched_and_its_leaving_unwatched():
    layer = get_channel_layer()
    assert isinstance(layer, RedisPubSubChannelLayer)
    assert _becomes(False)

    async def with_a_page_open() -> bool:
        # What the live consumer does when a page connects (channels' group_add), on a
        # loop of its own as another replica's would be.
        channel = await layer.new_channel()
        await layer.group_add(events.GROUP, channel)
        try:
            return await asyncio.to_thread(_becomes, True)
        finally:
            await layer.group_discard(events.GROUP, channel)

    assert asyncio.run(with_a_page_open())
    assert _becomes(False)


def test_an_unreachable_redis_counts_as_watched(monkeypatch):
    layer = get_channel_layer()
    assert isinstance(layer, RedisPubSubChannelLayer)
    # A port nothing listens on (the discard port): the layer cannot say, so events are built.
    monkeypatch.setitem(layer._kwargs, "hosts", ["redis://127.0.0.1:9/0"])
    assert events.watched() is True
