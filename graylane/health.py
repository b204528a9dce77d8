"""Liveness and readiness probes for load balancers and orchestrators.

`/readyz` checks the database, the broker and the channel layer, each in a thread of its
own, and answers within READY_TIMEOUT seconds whatever they do: a check still running
then counts as failed (a hung database must not hang its probe, nor pile up a thread per
probe: while a check is still running from an earlier probe, it is not started again).
Anonymous callers learn up or down only; the reasons are in the server log, and in the
answer for signed-in staff.
"""

import logging
import threading
import time
from collections.abc import Callable

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import connection
from django.db.migrations.recorder import MigrationRecorder
from django.http import HttpRequest, JsonResponse

log = logging.getLogger(__name__)
READY_TIMEOUT = 1.5


def healthz(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"status": "ok"})


def _check_database() -> None:
    try:
        # A real table: reading one waits for the database like any request would.
        MigrationRecorder.Migration.objects.exists()
    finally:
        connection.close()  # this thread's own connection (or back to the pool)


def _check_broker() -> None:
    if settings.REDIS_URL:
        import redis

        client = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=READY_TIMEOUT)
        try:
            client.ping()
        finally:
            client.close()


def _check_channel_layer() -> None:
    layer = get_channel_layer()
    async_to_sync(layer.group_send)("readyz", {"type": "readyz.ping"})


class Probe:
    """One check, run in a daemon thread; at most one run at a time."""

    def __init__(self, name: str, check: Callable[[], None]):
        self.name = name
        self.check = check
        self.lock = threading.Lock()
        self.thread: threading.Thread | None = None
        self.failure: str | None = None

    def start(self) -> bool:
        """Starts a run; False when the last one is still running."""
        with self.lock:
            if self.thread is not None and self.thread.is_alive():
                return False
            self.failure = "did not finish"
            self.thread = threading.Thread(
                target=self._run, name=f"readyz-{self.name}", daemon=True
            )
            self.thread.start()
            return True

    def _run(self) -> None:
        try:
            self.check()
        except Exception as exc:
            self.failure = f"{type(exc).__name__}: {exc}"
        else:
            self.failure = None

    def result(self, started: bool, deadline: float) -> str | None:
        """None when the check passed, else why not."""
        if not started:
            return f"still running after {READY_TIMEOUT:g} s (an earlier probe's)"
        assert self.thread is not None
        self.thread.join(max(0.0, deadline - time.monotonic()))
        if self.thread.is_alive():
            return f"no answer within {READY_TIMEOUT:g} s"
        return self.failure


PROBES = [
    Probe("database", _check_database),
    Probe("broker", _check_broker),
    Probe("channel_layer", _check_channel_layer),
]


def readiness() -> dict[str, str]:
    """{check: why it failed} for the checks that did not pass within READY_TIMEOUT."""
    deadline = time.monotonic() + READY_TIMEOUT
    started = [(probe, probe.start()) for probe in PROBES]
    failures = {}
    for probe, did_start in started:
        failure = probe.result(did_start, deadline)
        if failure is not None:
            failures[probe.name] = failure
    return failures


def readyz(request: HttpRequest) -> JsonResponse:
    failures = readiness()
    if not failures:
        return JsonResponse({"status": "ready"})
    log.warning("Not ready: %s", "; ".join(f"{k}: {v}" for k, v in failures.items()))
    body: dict[str, object] = {"status": "unavailable"}
    user = getattr(request, "user", None)
    if user is not None and user.is_authenticated and user.is_staff:
        body["failures"] = failures
    return JsonResponse(body, status=503)
