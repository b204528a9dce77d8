"""Adding a request's new samples to the per-minute rows: one transaction, two statements
however many samples and minutes it holds.

The ORM cannot add to a row on conflict (bulk_create's update_conflicts overwrites), and its
read, lock and bulk_update took 57 % of a POST's time under cProfile (resolving the CASE
expressions); `INSERT ... ON CONFLICT DO UPDATE SET n = n + excluded.n` is the same on
SQLite and PostgreSQL and needs no read. bench/live.py shows the difference in posts/s."""

from collections import defaultdict

from django.db import connection, transaction

from metrics.models import MinuteLatency, MinuteRollup
from metrics.samples import Sample


def _additive_upsert(cursor, model, keys: list[str], counters: list[str], rows: list) -> None:
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


def add(samples: list[Sample]) -> None:
    if not samples:
        return
    counts: dict[tuple[str, str, int], list[int]] = defaultdict(lambda: [0, 0])
    weights: dict[tuple[str, str, int, int], int] = defaultdict(int)
    for sample in samples:
        minute = sample.ts // 60 * 60
        count = counts[(sample.service, sample.version, minute)]
        count[0] += sample.total
        count[1] += sample.errors
        if sample.bucket is not None:
            weights[(sample.service, sample.version, minute, sample.bucket)] += sample.total
    # Sorted: concurrent requests touch shared rows in one order (no deadlock on PostgreSQL).
    with transaction.atomic(), connection.cursor() as cursor:
        _additive_upsert(
            cursor,
            MinuteRollup,
            ["service", "version", "minute"],
            ["total", "errors"],
            [(*key, *count) for key, count in sorted(counts.items())],
        )
        if weights:
            _additive_upsert(
                cursor,
                MinuteLatency,
                ["service", "version", "minute", "bucket"],
                ["weight"],
                [(*key, weight) for key, weight in sorted(weights.items())],
            )
