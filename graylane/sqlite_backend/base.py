"""Django's SQLite backend, with the threads of one process taking turns to write.

SQLite has one writer at a time. A transaction that finds the write lock taken waits in
SQLite's busy handler, which sleeps 1, 2, 5, 10, 15, 20... ms between tries, whatever
happens meanwhile: when a publish, a batch of gateway acks and a push delivery's acks write
at once in one process, the losers slept ~6-10 ms per transaction (measured), most of the
time a generation took to reach 50 gateways. Here a transaction first takes a lock of this
process (handed over the moment it is released), so threads of one process queue without
sleeping; other processes (a Celery worker) still meet in SQLite's busy handler.
"""

import threading

from django.db import OperationalError
from django.db.backends.sqlite3 import base

_locks: dict = {}
_locks_lock = threading.Lock()


def _write_lock(name: str):
    with _locks_lock:
        return _locks.setdefault(str(name), threading.Lock())


class DatabaseWrapper(base.DatabaseWrapper):
    _holding = None  # the lock this connection holds during a transaction

    def _start_transaction_under_autocommit(self):
        lock = _write_lock(self.settings_dict["NAME"])
        # As long as SQLite itself would wait before "database is locked".
        if not lock.acquire(timeout=self.settings_dict["OPTIONS"].get("timeout", 5)):
            raise OperationalError("database is locked (by another thread of this process)")
        self._holding = lock
        try:
            super()._start_transaction_under_autocommit()
        except BaseException:
            self._release()
            raise

    def _release(self) -> None:
        lock, self._holding = self._holding, None
        if lock is not None:
            lock.release()

    def _commit(self):
        try:
            return super()._commit()
        finally:
            self._release()

    def _rollback(self):
        try:
            return super()._rollback()
        finally:
            self._release()

    def _close(self):
        try:
            return super()._close()
        finally:
            self._release()
