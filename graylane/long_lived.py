"""Keeping a server process's long-lived objects out of the garbage collector's way.

A full collection walks every object the process holds: for a Django process here, tens of
milliseconds during which no request, poll or delivery moves. Most of those objects live as
long as the process: what importing made (modules, functions, Django's registries), and what
the first requests build lazily (views, serializers, the database driver's state, templates).
`gc.freeze()` moves them out of the collector's sight: once when the process has started,
and once more when it has warmed up (after a collection, so that garbage of the first
requests is not kept). Full collections then take a few milliseconds.

The benches that judge it, with and without (figures and the latest verdict in
bench/README.md): the server's collections under wrk,

    .venv/bin/python bench/gc_freeze.py   # needs Debian's wrk

and end to end against the publish -> ack target (in-process; on PostgreSQL + Redis with
`--database postgres://.../NAME --redis redis://...`):

    .venv/bin/python bench/propagation.py --compare no-gc-freeze
"""

import gc
import threading

WARM_UP_SECONDS = 15.0


def freeze_after_start() -> None:
    gc.freeze()
    timer = threading.Timer(WARM_UP_SECONDS, _freeze_warmed_up)
    timer.daemon = True
    timer.start()


def _freeze_warmed_up() -> None:
    gc.collect()
    gc.freeze()
