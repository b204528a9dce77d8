"""The gray flag through Celery: it travels in a task header and is restored in the worker,
and a task sent under GRAY goes to its queue's gray twin (`<queue>.<gray version>`), which
only gray workers consume, while a gray worker is there to consume it.

    app = Celery(...)
    install(app, gray_version="V2")           # publishers and workers, one line
    celery -A proj worker -Q tasks            # prod workers
    celery -A proj worker -Q tasks.V2         # gray workers

Which gray queues have a consumer is asked of the workers themselves (`control.inspect
().active_queues()`), in a background thread every `probe_interval_s` seconds, so publishing
never waits on it; between two probes the last answer is used. A broadcast costs one
round trip for the whole fleet, not one per task, and needs no registry of its own: a worker
that dies stops answering and its queue drops out within one interval. `fallback=False`
sends gray tasks to the gray queue even with no consumer (they wait for one).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from typing import Any

from celery import Celery, signals

from routing_engine import GRAY

from .flag import current_flag, parse_flag, reset_flag, set_flag

log = logging.getLogger(__name__)

# The task header: lower case, as AMQP and Redis transports keep header names as sent.
TASK_HEADER = "x-gray-status"
DEFAULT_PROBE_INTERVAL_S = 5.0


def gray_queue(queue: str, gray_version: str) -> str:
    return f"{queue}.{gray_version}"


class ConsumedQueues:
    """The names of the queues some worker consumes, refreshed in a daemon thread."""

    def __init__(self, app: Celery, interval_s: float = DEFAULT_PROBE_INTERVAL_S):
        self.app = app
        self.interval_s = interval_s
        self._names: frozenset[str] = frozenset()
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()

    def probe(self) -> frozenset[str]:
        try:
            answers = self.app.control.inspect(timeout=min(1.0, self.interval_s)).active_queues()
        except Exception as exc:  # the broker is down: keep the last answer
            log.warning("could not ask the workers for their queues: %r", exc)
            return self._names
        self._names = frozenset(
            queue["name"] for queues in (answers or {}).values() for queue in queues
        )
        return self._names

    def start(self) -> None:
        """Idempotent; started by the first gray task, so only gray publishers probe."""
        if self._thread is not None:
            return
        with self._start_lock:
            if self._thread is None:
                thread = threading.Thread(target=self._run, name="gray-queue-probe", daemon=True)
                thread.start()
                self._thread = thread

    def _run(self) -> None:
        while True:
            self.probe()
            time.sleep(self.interval_s)

    def __contains__(self, queue: object) -> bool:
        return queue in self._names


class GrayRouter:
    """A Celery router (`task_routes`) that sends a task published under GRAY to the gray twin
    of the queue it would have gone to, when that twin has a consumer (or always, without
    fallback). Other tasks keep their route: returning None lets the next router decide."""

    def __init__(
        self,
        app: Celery,
        gray_version: str,
        *,
        consumed: ConsumedQueues | None = None,
        fallback: bool = True,
    ):
        self.app = app
        self.gray_version = gray_version
        self.fallback = fallback
        self.consumed = consumed

    def __call__(
        self, name: str, args: Any, kwargs: Any, options: Mapping[str, Any], task=None, **kw: Any
    ) -> dict[str, str] | None:
        if current_flag() != GRAY:
            return None
        queue = options.get("queue") or self.app.conf.task_default_queue
        if not isinstance(queue, str):
            queue = queue.name  # a kombu.Queue
        twin = gray_queue(queue, self.gray_version)
        if self.fallback and self.consumed is not None:
            self.consumed.start()
            if twin not in self.consumed:
                return None
        return {"queue": twin}


def _publish_flag(headers: dict[str, Any] | None = None, **_: Any) -> None:
    flag = current_flag()
    if flag is not None and headers is not None:
        headers.setdefault(TASK_HEADER, flag)


_tokens: dict[str, Any] = {}
_tokens_lock = threading.Lock()


def _restore_flag(task_id: str | None = None, task=None, **_: Any) -> None:
    if task is None or task_id is None:
        return
    flag = parse_flag(task.request.get(TASK_HEADER))
    token = set_flag(flag)
    with _tokens_lock:
        _tokens[task_id] = token


def _clear_flag(task_id: str | None = None, **_: Any) -> None:
    with _tokens_lock:
        token = _tokens.pop(task_id, None) if task_id is not None else None
    if token is not None:
        reset_flag(token)


def install(
    app: Celery,
    gray_version: str,
    *,
    fallback: bool = True,
    probe_interval_s: float = DEFAULT_PROBE_INTERVAL_S,
) -> GrayRouter:
    """Connect the signals (publish: flag into the headers; worker: flag restored around each
    task) and put the gray router first in `app.conf.task_routes`."""
    signals.before_task_publish.connect(_publish_flag, weak=False)
    signals.task_prerun.connect(_restore_flag, weak=False)
    signals.task_postrun.connect(_clear_flag, weak=False)
    consumed = ConsumedQueues(app, probe_interval_s) if fallback else None
    router = GrayRouter(app, gray_version, consumed=consumed, fallback=fallback)
    routes = app.conf.task_routes
    if routes is None:
        routes = []
    elif not isinstance(routes, list | tuple):
        routes = [routes]
    app.conf.task_routes = [router, *routes]
    return router
