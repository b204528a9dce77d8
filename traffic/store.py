"""Where sampled requests wait for a preview or a replay: a window of recent samples per
service, bounded in time and count, in memory (this process) or in Redis (every replica).

Both stores refuse what is over a cap (the samples already held stay until they leave the
window), and neither keeps a sample past the window: the memory store drops them as it is
used, Redis trims them as it is used and lets a service's key expire a window after its
last sample arrived, so nothing outlives the window even if nobody reads.
"""

import itertools
import json
import os
import threading
import time
from abc import ABC, abstractmethod
from collections import defaultdict, deque
from collections.abc import Iterable

import redis
from django.conf import settings

from traffic.samples import TrafficSample

WINDOW_SECONDS = 15 * 60
PER_SERVICE = 200_000
IN_ALL = 1_000_000


class SampleStore(ABC):
    # How long a sample stays (seconds).
    window_seconds: int = WINDOW_SECONDS

    @abstractmethod
    def accept(self, samples: Iterable[TrafficSample], now: float | None = None) -> int:
        """Keep these samples; the number kept (the caps may drop some)."""

    @abstractmethod
    def window(
        self, service: str | None = None, now: float | None = None, ordered: bool = True
    ) -> list[TrafficSample]:
        """The samples of the window (of one service, or all), oldest first; `ordered=False`
        for a reader that only counts (a preview), which spares sorting a million."""


class MemorySampleStore(SampleStore):
    def __init__(
        self,
        window_seconds: int = WINDOW_SECONDS,
        per_service: int = PER_SERVICE,
        in_all: int = IN_ALL,
    ):
        self.window_seconds = window_seconds
        self.per_service = per_service
        self.in_all = in_all
        self._lock = threading.Lock()
        self._by_service: dict[str, deque[TrafficSample]] = {}

    def accept(self, samples: Iterable[TrafficSample], now: float | None = None) -> int:
        kept = 0
        now = time.time() if now is None else now
        with self._lock:
            self._expire(now)
            held = sum(len(q) for q in self._by_service.values())
            for sample in samples:
                if sample.ts < now - self.window_seconds:
                    continue
                queue = self._by_service.setdefault(sample.service, deque())
                if len(queue) >= self.per_service or held >= self.in_all:
                    continue
                queue.append(sample)
                held += 1
                kept += 1
        return kept

    def window(
        self, service: str | None = None, now: float | None = None, ordered: bool = True
    ) -> list[TrafficSample]:
        with self._lock:
            self._expire(time.time() if now is None else now)
            if service is not None:
                return list(self._by_service.get(service, ()))
            found = [s for queue in self._by_service.values() for s in queue]
        if ordered:
            found.sort(key=_ts)
        return found

    def _expire(self, now: float) -> None:
        oldest = now - self.window_seconds
        for name in list(self._by_service):
            queue = self._by_service[name]
            while queue and queue[0].ts < oldest:
                queue.popleft()
            if not queue:
                del self._by_service[name]


class RedisSampleStore(SampleStore):
    """Per service, the samples of each accepted batch as one JSON value of a hash (by batch
    id), and a sorted set of the batches (`<batch id>:<samples>`) scored by their newest
    `ts`, to count and trim them without reading them; one more sorted set indexes the
    services. A batch leaves when its newest sample leaves the window; its older samples are
    left out when read.

    Batches never change once written, so each process keeps those it has read, decoded:
    window() fetches only the batches new since its last call. Decoding is what costs: a
    window of 200,000 samples of one service took 1.0 s of CPU to read the first time,
    0.02 s the next (docs/api.md, "Traffic samples"). What a process keeps is bounded as
    the window is, and leaves it as the memory store's samples do: as the store is used.

    The caps are exact for one writer; replicas accepting at the same moment may pass them
    by a batch each."""

    def __init__(
        self,
        url: str,
        prefix: str,
        window_seconds: int = WINDOW_SECONDS,
        per_service: int = PER_SERVICE,
        in_all: int = IN_ALL,
    ):
        self.redis = redis.Redis.from_url(url, socket_timeout=10)
        self.prefix = f"{prefix}:traffic"
        self.window_seconds = window_seconds
        self.per_service = per_service
        self.in_all = in_all
        self._ids = (f"{os.getpid():x}.{os.urandom(4).hex()}.{n}" for n in itertools.count())
        self._lock = threading.Lock()
        # Per service, the batches read: batch id -> its samples.
        self._read: dict[str, dict[bytes, list[TrafficSample]]] = {}

    def _keys(self, service: str) -> tuple[str, str]:
        """The service's batches (a hash), and their index (a sorted set)."""
        return f"{self.prefix}:batches:{service}", f"{self.prefix}:index:{service}"

    def _services(self, oldest: float) -> list[str]:
        index = f"{self.prefix}:services"
        pipe = self.redis.pipeline(transaction=False)
        pipe.zremrangebyscore(index, "-inf", f"({oldest}")
        pipe.zrange(index, 0, -1)
        _, names = pipe.execute()
        return [name.decode() for name in names]

    def accept(self, samples: Iterable[TrafficSample], now: float | None = None) -> int:
        now = time.time() if now is None else now
        oldest = now - self.window_seconds
        batches: dict[str, list[TrafficSample]] = defaultdict(list)
        for sample in samples:
            if sample.ts >= oldest:
                batches[sample.service].append(sample)
        self._forget(oldest)
        if not batches:
            return 0
        services = sorted(set(self._services(oldest)) | set(batches))
        pipe = self.redis.pipeline(transaction=False)
        for name in services:
            index = self._keys(name)[1]
            pipe.zrangebyscore(index, "-inf", f"({oldest}")
            pipe.zremrangebyscore(index, "-inf", f"({oldest}")
            pipe.zrange(index, 0, -1)
        answers = pipe.execute()
        pipe = self.redis.pipeline(transaction=False)
        held_by = {}
        for name, gone, entries in zip(services, answers[::3], answers[2::3], strict=True):
            if gone:
                pipe.hdel(self._keys(name)[0], *(entry.rpartition(b":")[0] for entry in gone))
            held_by[name] = sum(int(entry.rpartition(b":")[2]) for entry in entries)
        held = sum(held_by.values())
        kept = 0
        for name, batch in batches.items():
            taken = batch[: max(0, min(self.per_service - held_by[name], self.in_all - held))]
            if not taken:
                continue
            newest = max(sample.ts for sample in taken)
            batch_id = next(self._ids)
            batches_key, index = self._keys(name)
            pipe.hset(batches_key, batch_id, _encode(taken))
            pipe.zadd(index, {f"{batch_id}:{len(taken)}": newest})
            pipe.zadd(f"{self.prefix}:services", {name: newest}, gt=True)
            for key in (batches_key, index):
                pipe.expire(key, self.window_seconds)
            held += len(taken)
            kept += len(taken)
        pipe.expire(f"{self.prefix}:services", self.window_seconds)
        pipe.execute()
        return kept

    def window(
        self, service: str | None = None, now: float | None = None, ordered: bool = True
    ) -> list[TrafficSample]:
        now = time.time() if now is None else now
        oldest = now - self.window_seconds
        self._forget(oldest)
        services = [service] if service is not None else self._services(oldest)
        pipe = self.redis.pipeline(transaction=False)
        for name in services:
            pipe.zrangebyscore(self._keys(name)[1], oldest, "+inf")
        current = {
            name: [entry.rpartition(b":")[0] for entry in entries]
            for name, entries in zip(services, pipe.execute(), strict=True)
        }
        with self._lock:
            missing = {
                name: [i for i in ids if i not in self._read.get(name, {})]
                for name, ids in current.items()
            }
        pipe = self.redis.pipeline(transaction=False)
        for name, ids in missing.items():
            if ids:
                pipe.hmget(self._keys(name)[0], ids)
        fetched = iter(pipe.execute())
        found = []
        with self._lock:
            for name, ids in current.items():
                known = self._read.get(name, {})
                if missing[name]:
                    for batch_id, value in zip(missing[name], next(fetched), strict=True):
                        if value is not None:  # gone since it was listed
                            known[batch_id] = _decode(name, value)
                known = {batch_id: known[batch_id] for batch_id in ids if batch_id in known}
                if known:
                    self._read[name] = known
                else:
                    self._read.pop(name, None)
                for batch in known.values():
                    found += (
                        batch if batch[0].ts >= oldest else [s for s in batch if s.ts >= oldest]
                    )
        if ordered:  # batches of several gateways interleave
            found.sort(key=_ts)
        return found

    def _forget(self, oldest: float) -> None:
        """Drop the batches read whose samples have all left the window."""
        with self._lock:
            for name in list(self._read):
                known = self._read[name]
                for batch_id in [i for i, batch in known.items() if batch[-1].ts < oldest]:
                    del known[batch_id]
                if not known:
                    del self._read[name]


def _ts(sample: TrafficSample) -> float:
    return sample.ts


def _encode(samples: list[TrafficSample]) -> str:
    """A batch (oldest first), less its samples' service (the keys')."""
    rows = [
        [s.ts, s.method, s.path, s.ip, s.user, s.city, s.headers, s.status, s.latency_ms]
        for s in sorted(samples, key=_ts)
    ]
    return json.dumps(rows, separators=(",", ":"))


def _decode(service: str, value: bytes) -> list[TrafficSample]:
    return [
        TrafficSample(ts, service, method, path, ip, user, city, headers, status, latency)
        for ts, method, path, ip, user, city, headers, status, latency in json.loads(value)
    ]


_configured: SampleStore | None = None
_configured_lock = threading.Lock()


def store() -> SampleStore:
    """The installation's sample store (REDIS_URL decides which), bounded by the
    TRAFFIC_SAMPLES_* settings."""
    global _configured
    with _configured_lock:
        if _configured is None:
            bounds = {
                "window_seconds": settings.TRAFFIC_SAMPLES_WINDOW_S,
                "per_service": settings.TRAFFIC_SAMPLES_PER_SERVICE,
                "in_all": settings.TRAFFIC_SAMPLES_MAX,
            }
            _configured = (
                RedisSampleStore(settings.REDIS_URL, settings.REDIS_PREFIX, **bounds)
                if settings.REDIS_URL
                else MemorySampleStore(**bounds)
            )
        return _configured
