"""Waking long polls when a new generation exists.

A bump in this process wakes this process's pollers directly and hands them the new
document, so they answer without touching the database. With REDIS_URL set it is also
published on Redis: a bump in a Celery worker (instances changed) or another replica must
wake the pollers held by this web server, whose relay reads the newest generation from the
database once and hands it to its pollers (a read per poller was a query per gateway on
every publish).
"""

import asyncio
import contextlib
import logging
import threading
import weakref
from collections.abc import Callable

import redis
import redis.asyncio as aioredis
from channels.db import database_sync_to_async
from django.conf import settings
from django.db import transaction

from events.after_commit import best_effort
from gateways import generation
from gateways.models import Gateway
from gateways.protocol import callers
from gateways.snapshot import Snapshot

log = logging.getLogger(__name__)


class GenerationWatch:
    """Announcements of new generations, for coroutines on any event loop, made from any
    thread. A poller takes a ticket, checks the database, then waits for an announcement
    made after its ticket: one made between the check and the wait is not lost."""

    def __init__(self):
        self._lock = threading.Lock()
        self._serial = 0
        self._last: Snapshot | None = None
        self._waiters: set[tuple[asyncio.AbstractEventLoop, asyncio.Future]] = set()
        # Told how many pollers an announcement is about to wake, before it wakes them (the
        # server process sizes its garbage collector by it: graylane/long_lived.py).
        self.waking: Callable[[int], None] | None = None

    def ticket(self) -> int:
        return self._serial

    def announce(self, snapshot: Snapshot | None) -> None:
        """`snapshot`: the new generation when it is known here, None when only its
        existence is (announced by another process)."""
        with self._lock:
            self._serial += 1
            self._last = snapshot
            news = (self._serial, snapshot)
            waiters, self._waiters = self._waiters, set()
        if self.waking is not None:
            self.waking(len(waiters))
        for loop, future in waiters:
            # A closed loop's poller is gone: nothing to wake.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(_resolve, future, news)

    async def wait(self, ticket: int, timeout: float) -> tuple[int, Snapshot | None] | None:
        """Wait up to `timeout` s for an announcement made after `ticket`. Returns None on
        timeout, else (a ticket for the next wait, the announced snapshot or None)."""
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        with self._lock:
            if self._serial != ticket:
                return self._serial, self._last
            self._waiters.add((loop, future))
        # A timer rather than asyncio.wait_for (a task and callbacks per wait): every poller
        # waits again after each generation.
        timer = loop.call_later(timeout, _resolve, future, None)
        try:
            return await future
        finally:
            timer.cancel()
            with self._lock:
                self._waiters.discard((loop, future))


def _resolve(future: asyncio.Future, news: tuple[int, Snapshot | None] | None) -> None:
    if not future.done():
        future.set_result(news)


watch = GenerationWatch()


def on_generation_made(sender, snapshot: Snapshot, **kwargs) -> None:
    """After a bump committed, in the process that made it: this process's pollers at
    once, the other processes' through Redis, best effort (a relay that missed it also
    re-checks when it reconnects: RedisRelay)."""
    watch.announce(snapshot)
    if settings.REDIS_URL:
        best_effort(
            lambda: redis_client().publish(settings.GATEWAY_WAKEUP_CHANNEL, str(snapshot.number)),
            f"announcing generation {snapshot.number} on Redis",
        )


def on_gateway_changed(
    sender: type[Gateway],
    instance: Gateway,
    update_fields: frozenset[str] | None = None,
    **kwargs: object,
) -> None:
    """post_save / post_delete of a gateway: who its token names is forgotten here
    (protocol/callers.py) and, once the change commits, in every other process, over Redis.
    A save of other fields only (update_fields) changes no identity."""
    if update_fields is not None and not callers.IDENTITY_FIELDS & update_fields:
        return
    pk = instance.pk
    callers.forget(pk)  # this process stops using it at once, and for good on commit:
    transaction.on_commit(lambda: _gateway_changed(pk))


def _gateway_changed(pk: int) -> None:
    callers.forget(pk)
    if settings.REDIS_URL:
        best_effort(
            lambda: redis_client().publish(settings.GATEWAY_CHANGED_CHANNEL, str(pk)),
            f"announcing that gateway {pk} changed on Redis",
        )


_redis_client: redis.Redis | None = None


def redis_client() -> redis.Redis:
    """This process's client for publishing announcements."""
    global _redis_client
    if _redis_client is None:
        _redis_client = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=5)
    return _redis_client


class RedisRelay:
    """One per event loop: relays announcements published on Redis to `watch`, and the
    gateways changed to protocol/callers.py (which trusts what it remembers only while a
    relay listens)."""

    RECONNECT_MAX = 10.0

    def __init__(self, loop: asyncio.AbstractEventLoop):
        self.subscribed = asyncio.Event()
        self.task = loop.create_task(self._run())

    async def _run(self) -> None:
        delay = 0.5
        channels = (settings.GATEWAY_WAKEUP_CHANNEL, settings.GATEWAY_CHANGED_CHANNEL)
        changed = settings.GATEWAY_CHANGED_CHANNEL.encode()
        while True:
            client = aioredis.Redis.from_url(settings.REDIS_URL)
            try:
                async with client.pubsub() as pubsub:
                    await pubsub.subscribe(*channels)
                    async for message in pubsub.listen():
                        if message["type"] == "subscribe":
                            if message["data"] == len(channels):  # both: listening
                                callers.listening(True)
                                self.subscribed.set()
                                delay = 0.5
                        elif message["type"] != "message":
                            pass
                        elif message["channel"] == changed:
                            callers.heard(message["data"])
                        else:
                            watch.announce(await _newest())
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("Gateway wake-up relay lost Redis (%s); reconnecting.", exc)
            finally:
                if self.subscribed.is_set():
                    callers.listening(False)
                self.subscribed.clear()
                await client.aclose()
            # An announcement may have been missed while disconnected: have pollers re-check.
            watch.announce(None)
            await asyncio.sleep(delay)
            delay = min(delay * 2, self.RECONNECT_MAX)


current = database_sync_to_async(generation.current, thread_sensitive=False)


async def _newest() -> Snapshot | None:
    """The newest generation, or None when the database cannot say now (each poller then
    reads it itself, as after a reconnect)."""
    try:
        return await current()
    except Exception as exc:
        log.warning("Gateway wake-up relay could not read the newest generation (%s).", exc)
        return None


_relays: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, RedisRelay]" = (
    weakref.WeakKeyDictionary()
)


async def announcements_arrive(timeout: float = 1.0) -> bool:
    """True when every new generation will be announced to this event loop: always without
    Redis (one process does everything), and with Redis once this loop's relay listens
    (started here, waited for briefly). False while Redis is unreachable: pollers then
    re-check the database now and then."""
    loop = asyncio.get_running_loop()
    relay = _relays.get(loop)
    if relay is not None and relay.subscribed.is_set():
        # Every poll asks: the listening relay answers first, as reading a setting through
        # its lazy wrapper cost 1.4 % of a replica's CPU (bench/fleet.py under py-spy).
        return True
    if not settings.REDIS_URL:
        return True
    if relay is None:
        relay = _relays[loop] = RedisRelay(loop)
    if not relay.subscribed.is_set():
        try:
            await asyncio.wait_for(relay.subscribed.wait(), timeout)
        except TimeoutError:
            return False
    return True
