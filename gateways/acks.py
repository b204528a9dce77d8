"""Recording what each gateway runs, whatever brought it there (a pull gateway's ack, a
delivery's answer), and failed deliveries; each refreshes the gateway's row on the status
page."""

import contextlib
import json
import logging
from collections.abc import Mapping, Sequence

from django.db import connection, transaction
from django.db.models import F, Field
from django.utils import timezone

from gateways import status_updates
from gateways.models import Gateway
from routing_engine import canonical_json

log = logging.getLogger(__name__)
MAX_ERROR_LENGTH = 2000


def record_acks(
    acks: dict[int, int],
    *,
    seen=(),
    delivered: bool = False,
    skipped: Mapping[int, Sequence[dict[str, str]]] | None = None,
) -> None:
    """Gateway pk -> the generation it runs, for many gateways at once: one UPDATE per
    distinct generation and list of skipped records (acks come in bursts, all for the newest
    one, and skip the same records if any), each moving a gateway forward only (an older or
    repeated ack just marks it seen). `skipped`: gateway pk -> the records of that generation
    it runs without (none if absent). `seen`: more gateways to mark seen now, with no ack."""
    now = timezone.now()
    skipped = skipped or {}
    by_number: dict[tuple[int, str], list[int]] = {}
    for pk, number in acks.items():
        by_number.setdefault((number, canonical_json(list(skipped.get(pk, ())))), []).append(pk)
    updates = [
        _update(pks, now, delivered, number, json.loads(records))
        for (number, records), pks in by_number.items()
    ]
    if seen:
        updates.append(_update(list(seen), now, delivered))
    # One statement needs no transaction of its own.
    atomic = len(updates) > 1
    with (
        transaction.atomic() if atomic else contextlib.nullcontext(),
        connection.cursor() as cursor,
    ):
        for sql, params in updates:
            cursor.execute(sql, params)
    status_updates.changed(*acks, *seen)


def _update(
    pks: list[int], now, delivered: bool, number: int | None = None, skipped: list | None = None
):
    """(SQL, params) of one UPDATE marking these gateways seen now (and attempted, when
    `delivered`) and, with `number`, acking it (with these skipped records): in SQL, only on
    gateways still below it, so an ack never moves a gateway back, whatever was written
    meanwhile. Plain SQL: built by the ORM (Case/When per field) it cost more CPU than the
    whole rest of a delivery's acks."""
    quote = connection.ops.quote_name

    def column(name: str) -> str:
        field = Gateway._meta.get_field(name)
        assert isinstance(field, Field) and field.column, f"{name} is not a column"
        return quote(field.column)

    stamp = connection.ops.adapt_datetimefield_value(now)
    assignments = [f"{column('last_seen')} = %s"]
    params: list[object] = [stamp]
    if delivered:
        assignments.append(f"{column('last_attempt_at')} = %s")
        params.append(stamp)
    if number is not None:
        # Each CASE reads the row as it was before this UPDATE (SQL semantics).
        records = Gateway._meta.get_field("skipped").get_db_prep_save(skipped or [], connection)
        for field, value in (
            ("acked_at", stamp),
            ("last_error", ""),
            ("attempts", 0),
            ("skipped", records),
            ("acked_generation", number),
        ):
            assignments.append(
                f"{column(field)} = CASE WHEN {column('acked_generation')} < %s "
                f"THEN %s ELSE {column(field)} END"
            )
            params += [number, value]
    in_list = ", ".join(["%s"] * len(pks))
    sql = (
        f"UPDATE {quote(Gateway._meta.db_table)} SET {', '.join(assignments)} "
        f"WHERE {column('id')} IN ({in_list})"
    )
    return sql, params + list(pks)


def record_failure(gateway: Gateway, message: str) -> None:
    log.warning("Delivery to gateway %s failed: %s", gateway.name, message)
    Gateway.objects.filter(pk=gateway.pk).update(
        last_error=message[:MAX_ERROR_LENGTH],
        attempts=F("attempts") + 1,
        last_attempt_at=timezone.now(),
    )
    status_updates.changed(gateway.pk)
