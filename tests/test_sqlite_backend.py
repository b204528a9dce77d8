"""graylane/sqlite_backend: threads of one process take turns to write.

On a SQLite file of its own (an extra database alias), so it runs whatever database the
suite is on (CI: PostgreSQL)."""

import threading

import pytest
from django.db import connections, transaction

ALIAS = "sqlite_backend_test"


@pytest.fixture
def sqlite_db(tmp_path, django_db_blocker):
    connections.settings[ALIAS] = connections.configure_settings(
        {
            "default": connections.settings["default"],
            ALIAS: {
                "ENGINE": "graylane.sqlite_backend",
                "NAME": str(tmp_path / "writers.sqlite3"),
                "OPTIONS": {
                    "timeout": 5,
                    "transaction_mode": "IMMEDIATE",
                    "init_command": "PRAGMA journal_mode=WAL;",
                },
            },
        }
    )[ALIAS]
    with django_db_blocker.unblock():
        with connections[ALIAS].cursor() as cursor:
            cursor.execute("CREATE TABLE entry (writer TEXT NOT NULL)")
        yield
        connections[ALIAS].close()
    del connections[ALIAS]
    del connections.settings[ALIAS]


def write(writer: str) -> None:
    with connections[ALIAS].cursor() as cursor:
        cursor.execute("INSERT INTO entry (writer) VALUES (%s)", [writer])


def written() -> list[str]:
    with connections[ALIAS].cursor() as cursor:
        cursor.execute("SELECT writer FROM entry ORDER BY writer")
        return [row[0] for row in cursor.fetchall()]


def in_threads(target, count: int) -> list[BaseException]:
    errors = []

    def run(n):
        try:
            target(n)
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            errors.append(exc)
        finally:
            connections[ALIAS].close()

    threads = [threading.Thread(target=run, args=(n,)) for n in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    return errors


def test_many_threads_writing_at_once_all_succeed(sqlite_db):
    def writes(n):
        for m in range(20):
            with transaction.atomic(using=ALIAS):
                write(f"t{n}-{m:02d}")

    assert in_threads(writes, 8) == []
    assert len(written()) == 160


def test_a_failed_transaction_lets_the_next_writer_in(sqlite_db):
    with pytest.raises(ZeroDivisionError), transaction.atomic(using=ALIAS):
        write("rolled back")
        1 / 0  # noqa: B018 - rolls the transaction back
    # Another thread must not wait for a lock the failed transaction kept.

    def write_in_a_transaction(n):
        with transaction.atomic(using=ALIAS):
            write(f"t{n}")

    assert in_threads(write_in_a_transaction, 1) == []
    assert written() == ["t0"]
