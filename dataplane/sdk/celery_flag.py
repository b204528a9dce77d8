"""The gray route through Celery: the flag, lane and versions travel in task headers and are
restored in the worker, and a task sent under GRAY goes to the twin of its queue for the
version its route asks for at the consuming service (`<queue>.<version>`), which only workers
of that version consume, while such a worker is there to consume it; else to the base queue.

    app = Celery(...)
    install(app, "V2", service="order-app")   # publishers and workers, one line
    celery -A proj worker -Q tasks            # prod workers
    celery -A proj worker -Q tasks.V2         # gray workers
    celery -A proj worker -Q tasks.V3         # workers of a lane's version V3

The version asked for: from the route's `X-Gray-Versions` at `service` (the consuming
service), when the request came through a gateway that sent it; else the gray lane's is
`gray_version`, and another lane's none (the base queue: without the versions a hop cannot
know a lane's members, and a request never reaches another lane's version).

Which twins have a consumer is asked of the workers themselves (`control.inspect
().active_queues()`), in a background thread every `probe_interval_s` seconds, so publishing
never waits on it; between two probes the last answer is used. A broadcast costs one
round trip for the whole fleet, not one per task, and needs no registry of its own: a worker
that dies stops answering and its queue drops out within one interval. `fallback=False`
sends such tasks to the twin even with no consumer (they wait for one).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from typing import Any

from celery import Celery, signals

from routing_engine import GRAY, GRAY_STATUS_HEADER
from routing_engine.hops import LANE_HEADER, VERSIONS_HEADER
from routing_engine.lanes import GRAY_LANE

from .flag import Route, current_route, reset_route, route_from, set_route

log = logging.getLogger(__name__)

# The task headers: lower case, as AMQP and Redis transports keep header names as sent.
TASK_HEADER = GRAY_STATUS_HEADER.lower()
LANE_TASK_HEADER = LANE_HEADER.lower()
VERSIONS_TASK_HEADER = VERSIONS_HEADER.lower()
DEFAULT_PROBE_INTERVAL_S = 5.0


def gray_queue(queue: str, version: str) -> str:
    """The twin of `queue` that workers of `version` consume."""
    return f"{queue}.{version}"


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
        """Idempotent; started by the first task for a twin, so only such publishers probe."""
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
    """A Celery router (`task_routes`) that sends a task published under GRAY to the twin of
    the queue it would have gone to for the version its route asks for at `service`, when
    that twin has a consumer (or always, without fallback). Other tasks keep their route:
    returning None lets the next router decide."""

    def __init__(
        self,
        app: Celery,
        gray_version: str,
        *,
        service: str | None = None,
        consumed: ConsumedQueues | None = None,
        fallback: bool = True,
    ):
        self.app = app
        self.gray_version = gray_version
        self.service = service
        self.fallback = fallback
        self.consumed = consumed

    def version_for(self, route: Route | None) -> str | None:
        """The version whose twin a task published under `route` goes to; None: the base
        queue (PROD, ALL, no route, or a request asking for the service's prod)."""
        if route is None or route.flag != GRAY:
            return None
        if route.hops is not None and self.service is not None:
            ask = route.hops.ask(self.service)
            # An ask without a fallback is one for prod itself (routing_engine.hops.ask_for).
            if ask is None or ask.fallback is None:
                return None
            return None if ask.version in route.hops.excluded(self.service) else ask.version
        return self.gray_version if route.lane in (None, GRAY_LANE) else None

    def __call__(
        self, name: str, args: Any, kwargs: Any, options: Mapping[str, Any], task=None, **kw: Any
    ) -> dict[str, str] | None:
        version = self.version_for(current_route())
        if version is None:
            return None
        queue = options.get("queue") or self.app.conf.task_default_queue
        if not isinstance(queue, str):
            queue = queue.name  # a kombu.Queue
        twin = gray_queue(queue, version)
        if self.fallback and self.consumed is not None:
            self.consumed.start()
            if twin not in self.consumed:
                return None
        return {"queue": twin}


def _publish_route(headers: dict[str, Any] | None = None, **_: Any) -> None:
    route = current_route()
    if route is None or headers is None:
        return
    headers.setdefault(TASK_HEADER, route.flag)
    if route.lane is not None:
        headers.setdefault(LANE_TASK_HEADER, route.lane)
    if route.versions is not None:
        headers.setdefault(VERSIONS_TASK_HEADER, route.versions)


_tokens: dict[str, Any] = {}
_tokens_lock = threading.Lock()


def _restore_route(task_id: str | None = None, task=None, **_: Any) -> None:
    if task is None or task_id is None:
        return
    request = task.request
    route = route_from(
        request.get(TASK_HEADER),
        request.get(LANE_TASK_HEADER),
        request.get(VERSIONS_TASK_HEADER),
        None,
    )
    token = set_route(route)
    with _tokens_lock:
        _tokens[task_id] = token


def _clear_route(task_id: str | None = None, **_: Any) -> None:
    with _tokens_lock:
        token = _tokens.pop(task_id, None) if task_id is not None else None
    if token is not None:
        reset_route(token)


def install(
    app: Celery,
    gray_version: str,
    *,
    service: str | None = None,
    fallback: bool = True,
    probe_interval_s: float = DEFAULT_PROBE_INTERVAL_S,
) -> GrayRouter:
    """Connect the signals (publish: the route into the headers; worker: the route restored
    around each task) and put the gray router first in `app.conf.task_routes`. `service`:
    the service whose workers consume the tasks, whose versions a route names."""
    signals.before_task_publish.connect(_publish_route, weak=False)
    signals.task_prerun.connect(_restore_route, weak=False)
    signals.task_postrun.connect(_clear_route, weak=False)
    consumed = ConsumedQueues(app, probe_interval_s) if fallback else None
    router = GrayRouter(app, gray_version, service=service, consumed=consumed, fallback=fallback)
    routes = app.conf.task_routes
    if routes is None:
        routes = []
    elif not isinstance(routes, list | tuple):
        routes = [routes]
    app.conf.task_routes = [router, *routes]
    return router
