"""The Redis relay of a web process: a generation announced by another process (a worker, or
another replica) reaches this process's waiting long polls with its document, read from the
database once for all of them, not once per poll."""

import asyncio

import pytest
import redis
from django.conf import settings

from gateways import generation
from gateways.protocol import wakeup
from gateways.snapshot import Snapshot

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        not settings.REDIS_URL, reason="needs REDIS_URL (CI sets it): announcements over Redis"
    ),
]


def test_an_announcement_from_another_process_hands_every_poll_the_same_read_document():
    number = generation.bump("made by another process, say")

    async def scenario():
        assert await wakeup.announcements_arrive(timeout=5)
        ticket = wakeup.watch.ticket()
        waits = [asyncio.ensure_future(wakeup.watch.wait(ticket, 5)) for _ in range(20)]
        await asyncio.sleep(0.05)  # every poll is waiting
        # What the other process's bump publishes (wakeup.on_generation_made).
        client = redis.Redis.from_url(settings.REDIS_URL)
        client.publish(settings.GATEWAY_WAKEUP_CHANNEL, str(number))
        client.close()
        return await asyncio.gather(*waits)

    news = asyncio.run(scenario())
    snapshots = [snapshot for _, snapshot in news]
    assert isinstance(snapshots[0], Snapshot)
    assert snapshots[0].number == number
    assert snapshots[0].body == generation.current().body
    assert all(snapshot is snapshots[0] for snapshot in snapshots)
