"""Keeping a server process's long-lived objects out of the garbage collector's way.

A full collection walks every object the process holds: for a Django process here, tens of
milliseconds during which no request, poll or delivery moves. Most of those objects live as
long as the process: what importing made (modules, functions, Django's registries), and what
the first requests build lazily (views, serializers, the database driver's state, templates).
`gc.freeze()` moves them out of the collector's sight: once when the process has started,
and once more when it has warmed up (after a collection, so that garbage of the first
requests is not kept). Full collections then take a few milliseconds. The youngest
generation is also collected less often than CPython's default (YOUNG_COLLECTION_THRESHOLD).

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
# The youngest generation is collected after this many more allocations than
# deallocations (CPython's default: 700). After every new generation of the gateway
# document, each held long poll is answered and made again at once: thousands of polls'
# objects (their tasks, futures, requests) are born in one burst and live for the next
# poll. At 700, each burst was collected dozens of times and most of it promoted into the
# oldest generation, whose full collections then walked every held connection:
# collections took 23-25 % of a replica's CPU with 1,000 gateways polling and 40 % with
# 5,000 (full ones 120-134 ms each), which is why the CPU per gateway grew with the fleet;
# with this threshold 7 % and 18-19 % (bench/fleet.py; bench/README.md, fleet.py).
YOUNG_COLLECTION_THRESHOLD = 50_000
# The rest of those 18-19 % came from the held polls themselves: the youngest generation's
# count rises with each tracked allocation and falls with each deallocation, but never below
# zero. After a new generation a replica first answers its held polls (their objects freed:
# the count falls to zero and stays there) and then takes their new polls (allocated: it
# rises by all of them), so every generation added a whole fleet's polls to the count, and
# each collection walked polls that were alive and would be freed at the next generation
# without the collector's help. With the threshold above that swing, the count goes down
# and up by it and the collector runs only when something else accumulates: a replica's
# CPU per gateway and generation fell from 0.159-0.191 ms to 0.132-0.136 ms at 5,000
# gateways (bench/README.md, fleet.py). A held poll keeps ~38 tracked objects under uvicorn (its
# scope and headers, the request cycle, tasks, coroutines, futures; gc.get_count() of a
# replica holding 2,500 polls and nothing else moving).
TRACKED_PER_HELD_POLL = 40
# Room between the swing and the threshold, for what accumulates between collections.
HELD_POLLS_HEADROOM = 4
# Never more: a collection walks what is young, alive or not (~0.2 s at this size).
MAX_YOUNG_COLLECTION_THRESHOLD = 2_000_000


def freeze_after_start() -> None:
    _, middle, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_COLLECTION_THRESHOLD, middle, oldest)
    gc.freeze()
    timer = threading.Timer(WARM_UP_SECONDS, _freeze_warmed_up)
    timer.daemon = True
    timer.start()


def size_for_held_polls(polls: int) -> None:
    """The youngest generation with room for `polls` long polls about to be answered and
    made again (wired to gateways.protocol.wakeup's announcements in server processes).
    Never made smaller: a generation is announced to a replica twice (directly where it was
    made, and over Redis), the second time to the few polls already renewed, in the middle
    of the burst."""
    swing = min(polls * TRACKED_PER_HELD_POLL * HELD_POLLS_HEADROOM, MAX_YOUNG_COLLECTION_THRESHOLD)
    current, middle, oldest = gc.get_threshold()
    if swing > current:
        gc.set_threshold(swing, middle, oldest)


def _freeze_warmed_up() -> None:
    gc.collect()
    gc.freeze()
