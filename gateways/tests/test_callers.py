"""Who polls, remembered by the process (gateways/protocol/callers.py): a poll of a known
gateway does not read its row, and a gateway changed or deleted is forgotten at once here
and, over Redis, in the other processes."""

import asyncio
import time
from datetime import timedelta

import pytest
import redis
from django.conf import settings
from django.db import connection
from django.utils import timezone

from gateways import generation
from gateways.models import Gateway
from gateways.protocol import callers
from gateways.protocol.endpoints import NAME_HEADER, poll

pytestmark = pytest.mark.django_db(transaction=True)


def polled(token: str) -> tuple[int, str | None]:
    """(status, the name the answer gives) of an immediate poll, on a loop of its own (with
    REDIS_URL, its relay listening first, as a server's)."""

    async def call():
        answer = await poll("GET", f"Token {token}", {"wait": "0"})
        return answer.status, answer.headers.get(NAME_HEADER)

    return asyncio.run(call())


def in_thread(action):
    """`action()`, on a thread of its own whose connection is then closed (the test
    database is dropped at the end)."""

    def run():
        try:
            action()
        finally:
            connection.close()

    return asyncio.to_thread(run)


def poll_twice_then(token: str, change) -> list[tuple[int, str | None]]:
    """Poll (remembered), poll again, `change()` in a thread, poll again: on one loop, whose
    relay listens throughout."""

    async def scenario():
        answers = []
        for step in (None, None, change):
            if step is not None:
                await in_thread(step)
            answer = await poll("GET", f"Token {token}", {"wait": "0"})
            answers.append((answer.status, answer.headers.get(NAME_HEADER)))
        return answers

    return asyncio.run(scenario())


def test_a_remembered_gateway_is_answered_without_reading_its_row(make_gateway):
    gateway, token, _ = make_gateway("edge-1")
    generation.current()

    def rename_behind_its_back():
        # A queryset update() sends no signal: only a poll that reads the row would see it.
        Gateway.objects.filter(pk=gateway.pk).update(name="edge-renamed")

    answers = poll_twice_then(token, rename_behind_its_back)
    assert answers == [(200, "edge-1")] * 3


def test_a_gateway_renamed_or_deleted_through_the_orm_is_forgotten_at_once(make_gateway):
    gateway, token, _ = make_gateway("edge-1")
    generation.current()

    def rename():
        gateway.name = "edge-2"
        gateway.save()

    assert poll_twice_then(token, rename)[-1] == (200, "edge-2")
    assert poll_twice_then(token, gateway.delete)[-1] == (401, None)


def test_a_poll_of_a_stale_remembered_gateway_still_records_it_seen(make_gateway):
    gateway, token, _ = make_gateway("edge-1")
    generation.current()
    assert polled(token)[0] == 200
    long_ago = timezone.now() - timedelta(hours=1)
    Gateway.objects.filter(pk=gateway.pk).update(last_seen=long_ago)
    callers.forget(gateway.pk)  # what this process knew is now ahead of the row
    assert polled(token)[0] == 200
    gateway.refresh_from_db()
    assert gateway.last_seen is not None and gateway.last_seen > long_ago


def test_a_read_that_overlapped_a_change_is_not_remembered(make_gateway):
    gateway, _, _ = make_gateway("edge-1")
    before = callers.epoch()
    callers.forget(gateway.pk)  # a change committed while the row was being read
    digest = gateway.token_hash
    callers.remember({digest: callers.Caller.of(gateway)}, before)
    assert digest not in callers._callers


@pytest.mark.skipif(not settings.REDIS_URL, reason="needs REDIS_URL: other processes over Redis")
def test_a_gateway_deleted_by_another_process_stops_polling_within_a_second(make_gateway):
    gateway, token, _ = make_gateway("edge-1")
    generation.current()

    def delete_row():
        with connection.cursor() as cursor:
            table = Gateway._meta.db_table
            cursor.execute(f"DELETE FROM {table} WHERE id = %s", [gateway.pk])

    async def scenario():
        first = await poll("GET", f"Token {token}", {"wait": "0"})
        assert first.status == 200
        # What another process's delete does here: the row goes (no signal in this
        # process), then its pk is published after the commit.
        await in_thread(delete_row)
        still = await poll("GET", f"Token {token}", {"wait": "0"})
        client = redis.Redis.from_url(settings.REDIS_URL)
        client.publish(settings.GATEWAY_CHANGED_CHANNEL, str(gateway.pk))
        client.close()
        published = time.monotonic()
        while (await poll("GET", f"Token {token}", {"wait": "0"})).status != 401:
            assert time.monotonic() - published < 1.0, "still answered a second after"
            await asyncio.sleep(0.01)
        return still.status, time.monotonic() - published

    still, after = asyncio.run(scenario())
    assert still == 200, "remembered until the message came (the row was not read)"
    print(f"deleted elsewhere -> 401 here after {after * 1000:.1f} ms")


@pytest.mark.skipif(not settings.REDIS_URL, reason="needs REDIS_URL: the relay's listening")
def test_nothing_remembered_is_used_while_no_relay_listens(make_gateway):
    gateway, token, _ = make_gateway("edge-1")
    generation.current()
    assert polled(token) == (200, "edge-1")  # remembered while that loop's relay listened
    # That loop, and its relay, are gone: Redis messages would no longer be heard here.
    assert not callers.trusted()
    assert callers.known(gateway.token_hash) is None
