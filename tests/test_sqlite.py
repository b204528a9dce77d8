"""The SQLite options of the default mode (settings.SQLITE_OPTIONS on Django's own backend):
what a user would notice, threads writing at once not failing with "database is locked",
a rollback rolling back, readers not waiting for a writer.

On a SQLite file of its own (an extra database alias), so it runs whatever database the
suite is on (CI: PostgreSQL)."""

import threading

import pytest
from django.conf import settings
from django.db import connections, transaction

ALIAS = "sqlite_options_test"


@pytest.fixture
def sqlite_db(tmp_path, django_db_blocker):
    connections.settings[ALIAS] = connections.configure_settings(
        {
            "default": connections.settings["default"],
            ALIAS: {
                "ENGINE": "django.db.backends.sqlite3",
                "NAME": str(tmp_path / "writers.sqlite3"),
                "OPTIONS": dict(settings.SQLITE_OPTIONS),
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


def test_the_file_is_in_wal_mode_with_normal_sync(sqlite_db):
    with connections[ALIAS].cursor() as cursor:
        cursor.execute("PRAGMA journal_mode")
        assert cursor.fetchone()[0] == "wal"
        cursor.execute("PRAGMA synchronous")
        assert cursor.fetchone()[0] == 1  # NORMAL


def test_many_threads_writing_at_once_all_succeed(sqlite_db):
    def writes(n):
        for m in range(20):
            # Read, then write, in one transaction: in SQLite's default (deferred) mode two
            # of these at once fail with "database is locked" whatever the busy timeout.
            with transaction.atomic(using=ALIAS):
                with connections[ALIAS].cursor() as cursor:
                    cursor.execute("SELECT COUNT(*) FROM entry")
                write(f"t{n}-{m:02d}")
            write(f"t{n}-{m:02d}-autocommit")

    assert in_threads(writes, 8) == []
    assert len(written()) == 8 * 20 * 2


def test_a_failed_transaction_is_rolled_back_and_lets_the_next_writer_in(sqlite_db):
    with pytest.raises(ZeroDivisionError), transaction.atomic(using=ALIAS):
        write("rolled back")
        1 / 0  # noqa: B018 - rolls the transaction back

    def write_in_a_transaction(n):
        with transaction.atomic(using=ALIAS):
            write(f"t{n}")

    assert in_threads(write_in_a_transaction, 1) == []
    assert written() == ["t0"]


def test_a_reader_does_not_wait_for_a_writer_in_its_transaction(sqlite_db):
    write("committed")
    inside, done = threading.Event(), threading.Event()

    def hold_a_write_transaction(n):
        with transaction.atomic(using=ALIAS):
            write("not yet committed")
            inside.set()
            done.wait(10)

    holder = threading.Thread(target=in_threads, args=(hold_a_write_transaction, 1))
    holder.start()
    try:
        assert inside.wait(10)
        assert written() == ["committed"]  # at once: WAL readers see the last commit
    finally:
        done.set()
        holder.join(10)
    assert written() == ["committed", "not yet committed"]
