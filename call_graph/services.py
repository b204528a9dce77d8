"""Call edges as the service SDK reports them: added to their minute's row, listed, read by
the bundle checks (releases/bundle_order.py), and pruned after CALL_EDGES_RETENTION_DAYS."""

import time
from collections import defaultdict
from collections.abc import Iterable

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Q, QuerySet

import events
from call_graph.models import CallEdge
from metrics.rollups import additive_upsert

KEYS = ["minute", "caller", "caller_version", "callee", "callee_version", "lane"]


def record(samples: list[dict]) -> int:
    """Add validated samples (call_graph.serializers) to their minute's rows, in one
    transaction, and tell the live pages once it commits; answers how many rows they
    touched."""
    counts: dict[tuple[int, str, str, str, str, str], list[int]] = defaultdict(lambda: [0, 0])
    for sample in samples:
        key = (
            sample["ts"] // 60 * 60,
            sample["caller"],
            sample["caller_version"],
            sample["callee"],
            sample["callee_version"],
            sample["lane"] or "",
        )
        counts[key][0] += sample["total"]
        counts[key][1] += sample["errors"]
    with transaction.atomic(), connection.cursor() as cursor:
        # Sorted: concurrent requests touch shared rows in one order (no deadlock).
        additive_upsert(
            cursor,
            CallEdge,
            KEYS,
            ["total", "errors"],
            [(*key, *count) for key, count in sorted(counts.items())],
        )
    recorded = events.CallsRecorded(tuple(sorted({s for key in counts for s in (key[1], key[3])})))
    transaction.on_commit(lambda: events.publish_best_effort(recorded))
    return len(counts)


def edges(since: int | None = None, service: str | None = None) -> QuerySet[CallEdge]:
    """Rows of minutes from `since` (epoch seconds) on, of calls made or taken by `service`;
    newest first."""
    rows = CallEdge.objects.all()
    if since is not None:
        rows = rows.filter(minute__gte=since // 60 * 60)
    if service is not None:
        rows = rows.filter(Q(caller=service) | Q(callee=service))
    return rows


def observed_calls(services: Iterable[str], since: int) -> set[tuple[str, str]]:
    """(caller, callee) of the calls between these services seen from `since` on (epoch
    seconds), any versions and lanes."""
    names = list(services)
    return set(
        edges(since)
        .filter(caller__in=names, callee__in=names, total__gt=0)
        .values_list("caller", "callee")
        .distinct()
        .order_by()
    )


def prune(now: float | None = None) -> int:
    """Delete the rows older than CALL_EDGES_RETENTION_DAYS; answers how many."""
    now = time.time() if now is None else now
    oldest = int(now - settings.CALL_EDGES_RETENTION_DAYS * 86400) // 60 * 60
    deleted, _ = CallEdge.objects.filter(minute__lt=oldest).delete()
    return deleted
