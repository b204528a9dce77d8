"""Work that follows a commit, best effort: live events, Celery tasks queued, long polls
woken, a registry told.

Such work cannot undo the change it follows, so it must never fail the request (or the task)
whose change is already saved. `after_commit(action, what)` runs `action` once the current
transaction commits (at once outside one), `best_effort(action, what)` at once, for work
that follows a commit already made. If it fails, that is logged; if it failed because
the database or Redis is unavailable (events.outages), it joins a backlog that one thread of
this process retries, oldest first, with a growing pause, for up to RETRY_FOR_SECONDS. While
the backlog is not empty, new work joins it at the end instead of running at once, so that
live pages get events in the order of the changes they follow, and a request does not wait
on a Redis that is known to be down.

What is given up on is repaired by the periodic jobs (the gateways' sweep redelivers the
newest generation, the registry sync ends drains and re-applies an operator's intent) or,
for live events, by the next page load. The backlog lives in memory: a process that stops
loses it, with the same repairs.
"""

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from django.db import close_old_connections, connections, transaction

from events.outages import unavailable

log = logging.getLogger(__name__)

RETRY_FOR_SECONDS = 300.0
FIRST_PAUSE_SECONDS = 0.5
MAX_PAUSE_SECONDS = 10.0
# Past this many, new work is dropped (and logged) rather than held: a long outage must not
# grow the process without bound.
MAX_BACKLOG = 10_000


@dataclass
class _Work:
    action: Callable[[], object]
    what: str
    due_at: float = field(default_factory=time.monotonic)
    failed: bool = False


def after_commit(action: Callable[[], object], what: str) -> None:
    """best_effort(action, what) once the current transaction commits (at once outside one)."""
    transaction.on_commit(lambda: best_effort(action, what))


def best_effort(action: Callable[[], object], what: str) -> None:
    """Run `action` now, or after the backlog, for a change that is committed already (a
    receiver of a signal sent after commit); never raises. `what` names it in the log
    ("queuing the delivery of generation 7")."""
    work = _Work(action, what)
    if len(_backlog) == 0 and _attempt(work) != "retry":
        return
    if not _backlog.join(work):
        log.error("After a commit, dropped %s: %d others wait already.", what, MAX_BACKLOG)


class _Backlog:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queue: deque[_Work] = deque()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    def __len__(self) -> int:
        return len(self._queue)

    def join(self, work: _Work) -> bool:
        """Add `work` at the end; False when the backlog is full (dropped)."""
        with self._lock:
            if len(self._queue) >= MAX_BACKLOG:
                return False
            self._queue.append(work)
            if self._thread is None or not self._thread.is_alive():
                # (Also after a fork: a prefork worker's child has no thread of its parent.)
                self._thread = threading.Thread(
                    target=self._retry_forever, name="after-commit-retries", daemon=True
                )
                self._thread.start()
        self._wake.set()
        return True

    def _retry_forever(self) -> None:
        pause = FIRST_PAUSE_SECONDS
        while True:
            with self._lock:
                work = self._queue[0] if self._queue else None
            if work is None:
                connections.close_all()
                self._wake.wait()
                self._wake.clear()
                continue
            if work.failed:  # give the outage time
                time.sleep(pause)
                pause = min(pause * 2, MAX_PAUSE_SECONDS)
            close_old_connections()
            if _attempt(work) == "retry":
                connections.close_all()
                continue
            pause = FIRST_PAUSE_SECONDS
            with self._lock:
                self._queue.popleft()


_backlog = _Backlog()


def _attempt(work: _Work) -> str:
    """Run `work`: "done", "dropped" (a failure retrying will not cure, or it failed for
    too long), or "retry"."""
    try:
        work.action()
    except Exception as exc:
        cause = unavailable(exc)
        if cause is None:
            log.exception("After a commit, %s failed; not retried.", work.what)
            return "dropped"
        waited = time.monotonic() - work.due_at
        if waited > RETRY_FOR_SECONDS:
            log.error(
                "After a commit, gave up %s: %s unavailable for %.0f s (%s).",
                *(work.what, cause, waited, exc),
            )
            return "dropped"
        log.warning("After a commit, %s waits: %s is unavailable (%s).", work.what, cause, exc)
        work.failed = True
        return "retry"
    return "done"
