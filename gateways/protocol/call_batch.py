"""The database work of gateways' calls (polls and acks), done for many calls at once.

A new generation makes every gateway call back within milliseconds: each pull gateway gets
its answer, acks it and polls again. Done one call at a time, that is three or four
queries each and as many small write transactions competing for the database's write lock
(on SQLite a loser sleeps in the busy handler, milliseconds at a time). Here the calls that
arrive while one batch is with the database wait together for the next one, which needs
the same few statements for one call or fifty: no added delay when calls are rare, one
writer when they come in a burst.
"""

import asyncio
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime

from channels.db import database_sync_to_async
from django.utils import timezone

from accounts.models import ApiToken, hash_token
from gateways import generation, status_updates
from gateways.acks import record_acks, record_failure
from gateways.models import Gateway
from gateways.protocol import callers
from gateways.snapshot import Snapshot

# A poll records `last_seen` unless it is fresher than this: staleness is judged in tens of
# seconds, and a gateway polls again right after every answer.
LAST_SEEN_RESOLUTION_SECONDS = 1.0


@dataclass(frozen=True)
class Poll:
    key: str  # the gateway's token
    # The generation the gateway says it applied since its last poll (`applied=N`): recorded
    # as its ack `{"generation": N}` would be. None: the poll says nothing of it.
    applied: int | None = None


@dataclass(frozen=True)
class Ack:
    key: str
    name: str  # the gateway named in the URL
    number: int | None  # the generation it says it runs; None: the body did not say
    error: str | None = None  # set: it refused that generation, and why
    engine: tuple[str, str] | None = None  # (engine, engine version) it says it runs
    skipped: tuple[dict[str, str], ...] = ()  # records of that generation it runs without


@dataclass(frozen=True)
class Refusal:
    """A call answered with an error: HTTP status and DRF-shaped body."""

    status: int
    body: dict


@dataclass(frozen=True)
class Polled:
    """A poll's answer: the newest generation, and the name of the gateway that asked (it
    may not know it: a gateway started with its token alone learns it from the answer)."""

    snapshot: Snapshot
    name: str


@dataclass(frozen=True)
class AckRecorded:
    name: str
    acked_generation: int
    status: str


UNAUTHENTICATED = Refusal(
    401, {"detail": "Authentication credentials were not provided or are invalid."}
)
NOT_A_GATEWAY = Refusal(
    403, {"detail": "This endpoint is for gateways: use the gateway's own token."}
)


def answer(calls: list[Poll | Ack]) -> list[Polled | AckRecorded | Refusal]:
    """Each call's answer, in order: a Poll gets the newest generation's snapshot (its
    `applied` recorded as an Ack of it would be), an Ack what was recorded. Reads the rows
    of the callers this process does not remember (protocol/callers.py; an Ack's always) in
    one query and writes once (gateways.acks.record_acks), plus once per refused
    generation."""
    hashes = {call.key: hash_token(call.key) for call in calls}
    pollers: dict[str, callers.Caller] = {}
    unread: set[str] = set()
    for call in calls:
        digest = hashes[call.key]
        caller = callers.known(digest) if isinstance(call, Poll) else None
        if caller is None:
            unread.add(digest)
        else:
            pollers[digest] = caller
    gateways: dict[str, Gateway] = {}
    if unread:
        since = callers.epoch()
        # Unordered: Gateway's default order (by name) is of no use to a lookup by token,
        # and building it costs a fifth of this query's CPU, several times per generation.
        rows = Gateway.objects.filter(token_hash__in=unread).order_by()
        gateways = {g.token_hash: g for g in rows}
        read = {digest: callers.Caller.of(g) for digest, g in gateways.items()}
        callers.remember(read, since)
        pollers.update(read)
    unknown = unread - gateways.keys()
    users = set(
        ApiToken.objects.filter(key_hash__in=unknown).values_list("key_hash", flat=True)
        if unknown
        else ()
    )
    snapshot = generation.current()
    now = timezone.now()
    seen: set[int] = set()
    record = _Recording()
    answers: list[Polled | AckRecorded | Refusal] = []
    for call in calls:
        digest = hashes[call.key]
        if isinstance(call, Poll):
            caller = pollers.get(digest)
            if caller is None:
                answers.append(NOT_A_GATEWAY if digest in users else UNAUTHENTICATED)
                continue
            answers.append(Polled(snapshot, caller.name))
            # The ack folded into the poll, recorded as that ack would be: a generation that
            # does not exist yet is not recorded (the ack would get 400), and the poll is
            # answered all the same (its `known` may be one the database lost).
            if call.applied is not None and call.applied <= snapshot.number:
                record.ack(caller.pk, call.applied, ())
                continue
            last_seen = caller.last_seen
            if last_seen is None or (now - last_seen).total_seconds() >= (
                LAST_SEEN_RESOLUTION_SECONDS
            ):
                if caller.is_stale(now):
                    status_updates.changed(caller.pk)  # it is back
                seen.add(caller.pk)
        else:
            gateway = gateways.get(digest)
            if gateway is None:
                answers.append(NOT_A_GATEWAY if digest in users else UNAUTHENTICATED)
            else:
                answers.append(_record_ack(gateway, call, snapshot.number, now, record))
    if record.acks or seen:
        try:
            record_acks(record.acks, seen=seen - record.acks.keys(), skipped=record.skipped)
        except Exception:
            # What this process knew of their last_seen may now be ahead of the rows.
            for pk in record.acks.keys() | seen:
                callers.forget(pk)
            raise
        written = record.acks.keys() | seen
        for caller in pollers.values():
            if caller.pk in written:
                caller.last_seen = now
    for pk, (engine, version) in record.engines.items():  # rare: a gateway changed engine
        Gateway.objects.filter(pk=pk).update(engine=engine, engine_version=version)
    for gateway, message in record.refused.items():
        record_failure(gateway, message)
    return answers


@dataclass
class _Recording:
    """What a batch's acks write, once they are all read (see `answer`)."""

    acks: dict[int, int] = field(default_factory=dict)  # gateway pk -> generation it runs
    # gateway pk -> the records of that generation it runs without
    skipped: dict[int, tuple[dict[str, str], ...]] = field(default_factory=dict)
    refused: dict[Gateway, str] = field(default_factory=dict)  # -> its error ack's message
    engines: dict[int, tuple[str, str]] = field(default_factory=dict)  # -> engine newly named

    def ack(self, pk: int, number: int, skipped: tuple[dict[str, str], ...]) -> None:
        """An ack of `number` (without these records) to write: acks only move forward."""
        self.acks[pk] = max(self.acks.get(pk, 0), number)
        if self.acks[pk] == number:
            self.skipped[pk] = skipped


def _record_ack(
    gateway: Gateway, call: Ack, newest: int, now: datetime, record: _Recording
) -> AckRecorded | Refusal:
    """One posted ack of a batch: its answer, its writes noted in
    `record`."""
    answer_ = _ack(gateway, call, newest, now, record)
    said = call.engine
    changed = said is not None and (gateway.engine, gateway.engine_version) != said
    if changed and said is not None and not isinstance(answer_, Refusal):
        gateway.engine, gateway.engine_version = said
        record.engines[gateway.pk] = said
    return answer_


def _ack(gateway: Gateway, call: Ack, newest: int, now, record: _Recording):
    if gateway.name != call.name:
        return Refusal(403, {"detail": "A gateway acknowledges only for itself."})
    if call.number is None:
        message = 'Send {"generation": N}, N a non-negative integer.'
        return Refusal(400, {"generation": [message]})
    if call.number > newest:
        message = f"Generation {call.number} does not exist; the newest is {newest}."
        return Refusal(400, {"generation": [message]})
    if call.error is not None:
        # It keeps running what it ran: nothing moves, the error shows (status `failing`).
        if call.number > gateway.acked_generation:
            gateway.last_error = message = f"Refused generation {call.number}: {call.error}"
            record.refused[gateway] = message
        seen_only = max(record.acks.get(gateway.pk, 0), gateway.acked_generation)
        record.acks[gateway.pk] = seen_only
        gateway.last_seen = now
        return AckRecorded(gateway.name, gateway.acked_generation, gateway.status_at(newest, now))
    if call.number > gateway.acked_generation:
        gateway.acked_generation = call.number
        gateway.last_error = ""
    record.ack(gateway.pk, call.number, call.skipped)
    gateway.last_seen = now
    return AckRecorded(gateway.name, gateway.acked_generation, gateway.status_at(newest, now))


class CallBatcher:
    """One per event loop: collects calls and hands them to `answer_batch` (by default
    `answer` on the loop's shared executor, not a thread per call) a batch at a time."""

    def __init__(self, answer_batch: Callable[[list], Awaitable[list]] | None = None):
        self._answer_batch = answer_batch or _in_executor
        self._waiting: list[tuple[Poll | Ack, asyncio.Future]] = []
        self._draining: asyncio.Task | None = None  # held: the loop keeps weak references

    async def submit(self, call: Poll | Ack):
        future = asyncio.get_running_loop().create_future()
        self._waiting.append((call, future))
        if self._draining is None:
            # Starts on the loop's next turn: calls that arrived in this turn join it.
            self._draining = asyncio.get_running_loop().create_task(self._drain())
        return await future

    async def _drain(self) -> None:
        try:
            while self._waiting:
                batch, self._waiting = self._waiting, []
                try:
                    answers = await self._answer_batch([call for call, _ in batch])
                except Exception as exc:
                    for _, future in batch:
                        if not future.done():
                            future.set_exception(exc)
                    continue
                for (_, future), result in zip(batch, answers, strict=True):
                    if not future.done():  # a caller that went away was cancelled
                        future.set_result(result)
        finally:
            self._draining = None


# Django's connection handling around each call, on the loop's shared executor.
_in_executor = database_sync_to_async(answer, thread_sensitive=False)

_batchers: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, CallBatcher]" = (
    weakref.WeakKeyDictionary()
)


async def submit(call: Poll | Ack):
    """The answer to one call, made together with whatever other calls are waiting."""
    loop = asyncio.get_running_loop()
    batcher = _batchers.get(loop)
    if batcher is None:
        batcher = _batchers[loop] = CallBatcher()
    return await batcher.submit(call)
