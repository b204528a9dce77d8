"""graylane/sqlite_backend: threads of one process take turns to write."""

import threading

import pytest
from django.db import connection, connections, transaction

from releases.models import AuditEntry

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        connection.vendor != "sqlite", reason="the SQLite backend only (CI also runs PostgreSQL)"
    ),
]


def audit(n: int) -> None:
    AuditEntry.objects.create(actor=f"t{n}", source="test", action="x", object="y")


def in_threads(target, count: int) -> list[BaseException]:
    errors = []

    def run(n):
        try:
            target(n)
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run, args=(n,)) for n in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    return errors


def test_many_threads_writing_at_once_all_succeed():
    def writes(n):
        for m in range(20):
            with transaction.atomic():
                audit(n * 100 + m)

    assert in_threads(writes, 8) == []
    assert AuditEntry.objects.filter(source="test").count() == 160


def test_a_failed_transaction_lets_the_next_writer_in():
    with pytest.raises(ZeroDivisionError), transaction.atomic():
        audit(1)
        1 / 0  # noqa: B018 - rolls the transaction back
    # Another thread must not wait for a lock the failed transaction kept.
    assert in_threads(lambda n: audit(n), 1) == []
    assert list(AuditEntry.objects.filter(source="test").values_list("actor", flat=True)) == ["t0"]
