"""Consul changes start a sync at once instead of at the next periodic pass: blocking queries.

Why this design: the sync stays the one periodic pass every registry has (it reads the whole
registry, writes in one transaction, marks the registry stale on a failure and never deletes),
and a Consul registry also gets a *watch*: two threads in the worker process, each holding a
blocking query (``ConsulAdapter.wait_for_change``) on one of ``consul.WATCHED``, the catalog
(registrations: which instances, their address, port and Meta) and every check (health and
maintenance). When an index moves, the watch only asks for a pass (``trigger``); it never
writes itself, so whatever it misses (it stopped, Consul was away, a pass was running and the
asked one found the lease taken) the periodic pass still reads. Long-polling inside the Celery
task instead would hold a worker for the whole wait, and one thread per service (as Consul's
own watchers do) would grow with the catalog; two queries per registry cover every change.

A pass keeps its registry's watch alive (``keep_watching``); a watch that no pass renewed for
``STALE_PASSES`` intervals (registry disabled or deleted) ends after its current query. Each
worker process that syncs a registry watches it: at worst a change asks for a pass twice, and
the lease lets one run.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from registry_sync.adapters import ConsulAdapter, RegistryError
from registry_sync.adapters.consul import WATCHED
from registry_sync.models import Registry
from registry_sync.registries import adapter_for

log = logging.getLogger(__name__)

WAIT_SECONDS = 60.0  # each blocking query's wait: how late a watch may notice it should end
RETRY_SECONDS = 5.0  # after a failed query (Consul away): the periodic pass marks it stale
STALE_PASSES = 3


class Watch:
    """The blocking queries of one registry; ``trigger()`` is called on every change."""

    def __init__(
        self,
        make_adapter: Callable[[], ConsulAdapter],
        trigger: Callable[[], object],
        *,
        wait: float = WAIT_SECONDS,
        retry: float = RETRY_SECONDS,
    ):
        self.make_adapter = make_adapter
        self.trigger = trigger
        self.wait = wait
        self.retry = retry
        self.expires_at = float("inf")
        self.stopped = threading.Event()
        self.threads = [
            threading.Thread(
                target=self._run, args=(path,), name=f"consul-watch{path}", daemon=True
            )
            for path in WATCHED
        ]

    def start(self) -> Watch:
        for thread in self.threads:
            thread.start()
        return self

    def stop(self) -> None:
        self.stopped.set()

    def join(self, timeout: float) -> None:
        for thread in self.threads:
            thread.join(timeout)

    def _run(self, path: str) -> None:
        index = 0
        with self.make_adapter() as adapter:
            while not self.stopped.is_set() and time.monotonic() < self.expires_at:
                try:
                    new = adapter.wait_for_change(path, index, self.wait)
                except RegistryError as exc:
                    log.info("Consul watch of %s failed, retrying: %s", path, exc)
                    index = 0
                    self.stopped.wait(self.retry)
                    continue
                if index and new != index and not self.stopped.is_set():
                    self._ask_for_a_pass()
                index = new

    def _ask_for_a_pass(self) -> None:
        try:
            self.trigger()
        except Exception:  # the broker away: the periodic pass still comes; keep watching
            log.exception("A Consul change could not start a sync")


_watches: dict[int, tuple[tuple, Watch]] = {}
_lock = threading.Lock()


def _settings_of(registry: Registry) -> tuple:
    return (registry.base_url, registry.datacenter, registry.token)


def keep_watching(registry: Registry, trigger: Callable[[], object]) -> None:
    """Start ``registry``'s watch in this process if it is not running (or runs with settings
    since changed), and keep it alive for ``STALE_PASSES`` more sync intervals."""
    settings = _settings_of(registry)
    with _lock:
        known = _watches.get(registry.pk)
        if known is None or known[0] != settings or known[1].stopped.is_set():
            if known is not None:
                known[1].stop()
            watch = Watch(
                lambda: _consul_adapter(registry), trigger, wait=WAIT_SECONDS, retry=RETRY_SECONDS
            ).start()
            _watches[registry.pk] = (settings, watch)
            known = _watches[registry.pk]
        known[1].expires_at = time.monotonic() + STALE_PASSES * max(registry.sync_interval, 1.0)


def _consul_adapter(registry: Registry) -> ConsulAdapter:
    adapter = adapter_for(registry)
    assert isinstance(adapter, ConsulAdapter)
    return adapter


def stop_all(timeout: float = 5.0) -> None:
    """End every watch of this process (tests; a worker's end needs nothing: daemon threads)."""
    with _lock:
        watches = [watch for _settings, watch in _watches.values()]
        _watches.clear()
    for watch in watches:
        watch.stop()
    for watch in watches:
        watch.join(timeout)
