"""Adding ingested samples to the per-minute rows: one transaction, two statements however
many samples and minutes it holds, for all the requests of this process that wait.

The ORM cannot add to a row on conflict (bulk_create's update_conflicts overwrites), and its
read, lock and bulk_update took 57 % of a POST's time under cProfile (resolving the CASE
expressions); `INSERT ... ON CONFLICT DO UPDATE SET n = n + excluded.n` is the same on
SQLite and PostgreSQL and needs no read.

Fifty gateways post within the same second, each request on a thread of its own. Each
writing its own transaction, they queue for the database's write lock, and on SQLite a
loser sleeps in the busy handler (milliseconds at a time, growing). So requests that
arrive while one writes wait for the next writer, which writes all of theirs together
(group commit): with 100 gateways posting every second, the server keeps up with all of
them instead of about half (`bench/live.py --seconds 30 --gateways 100 --redis redis://...`,
before and after; figures in bench/README.md)."""

import threading
from collections import defaultdict
from dataclasses import dataclass

from django.db import DatabaseError, connection, transaction
from django.db.backends.utils import CursorWrapper
from django.db.models import Model

from events import outages
from metrics.models import MinuteLatency, MinuteRollup
from metrics.samples import Sample


def additive_upsert(
    cursor: CursorWrapper,
    model: type[Model],
    keys: list[str],
    counters: list[str],
    rows: list[tuple[str | int, ...]],
) -> None:
    """INSERT `rows` (`keys` then `counters`); a row whose keys are there already adds its
    counters to it (call_graph/services.py writes its edges so too)."""
    quote = connection.ops.quote_name
    table = quote(model._meta.db_table)
    columns = ", ".join(quote(name) for name in keys + counters)
    values = ", ".join(["%s"] * (len(keys) + len(counters)))
    additions = ", ".join(
        f"{quote(name)} = {table}.{quote(name)} + excluded.{quote(name)}" for name in counters
    )
    conflict = ", ".join(quote(name) for name in keys)
    cursor.executemany(
        f"INSERT INTO {table} ({columns}) VALUES ({values}) "
        f"ON CONFLICT ({conflict}) DO UPDATE SET {additions}",
        rows,
    )


@dataclass
class _Waiting:
    samples: list[Sample]
    done: bool = False
    error: BaseException | None = None


class _GroupCommit:
    def __init__(self) -> None:
        self._turn = threading.Condition()
        self._waiting: list[_Waiting] = []
        self._writing = False

    def add(self, samples: list[Sample]) -> None:
        """Returns once these samples are committed; raises what writing them raised."""
        mine = _Waiting(samples)
        with self._turn:
            self._waiting.append(mine)
            while not mine.done:
                if self._writing:
                    self._turn.wait()
                    continue
                batch, self._waiting, self._writing = self._waiting, [], True
                self._turn.release()
                error = None
                try:
                    _write([sample for waiting in batch for sample in waiting.samples])
                except BaseException as exc:
                    error = exc
                finally:
                    self._turn.acquire()
                    self._writing = False
                    for waiting in batch:
                        waiting.done, waiting.error = True, error
                    self._turn.notify_all()
        if mine.error is not None:
            raise mine.error


_group_commit = _GroupCommit()


def add(samples: list[Sample]) -> None:
    """Add these samples to the rollups, committed when this returns."""
    if samples:
        _group_commit.add(samples)


def _write(samples: list[Sample]) -> None:
    counts: dict[tuple[str, str, str, int], list[int]] = defaultdict(lambda: [0, 0])
    # The latency buckets of a version's lanes together: no page reads a lane's latency.
    weights: dict[tuple[str, str, int, int], int] = defaultdict(int)
    for sample in samples:
        minute = sample.ts // 60 * 60
        count = counts[(sample.service, sample.version, sample.lane or "", minute)]
        count[0] += sample.total
        count[1] += sample.errors
        if sample.bucket is not None:
            weights[(sample.service, sample.version, minute, sample.bucket)] += sample.total
    xid = None
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            xid = outages.transaction_id(connection)
            # Sorted: concurrent requests touch shared rows in one order (no deadlock on
            # PostgreSQL).
            additive_upsert(
                cursor,
                MinuteRollup,
                ["service", "version", "lane", "minute"],
                ["total", "errors"],
                [(*key, *count) for key, count in sorted(counts.items())],
            )
            if weights:
                additive_upsert(
                    cursor,
                    MinuteLatency,
                    ["service", "version", "minute", "bucket"],
                    ["weight"],
                    [(*key, weight) for key, weight in sorted(weights.items())],
                )
    except DatabaseError as exc:
        # These are other requests' samples too, and a COMMIT that got no answer may have
        # saved them: each of those requests would answer 503 for samples that are counted.
        if xid is None or outages.commit_failed_on(exc) is None:
            raise
        if not outages.committed_after_all(connection.alias, xid):
            raise
