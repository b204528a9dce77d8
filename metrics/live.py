"""Live windows: the last minutes of samples per (service, version) and second, for the
sliding 10 s / 1 min / 5 min figures that /ws/live/ shows.

One interface, two backends: Redis when REDIS_URL is set (every web process and the worker
see the same windows; keys under REDIS_PREFIX), process memory otherwise (the default mode
runs everything in one process). Both also remember which (gateway, service, version, ts)
they have counted, so a re-sent sample is counted once, and `accept` answers the samples
that were new: only those go on to the rollups.
"""

import json
import threading
import time
from abc import ABC, abstractmethod
from collections import defaultdict
from dataclasses import dataclass, field

import redis
from django.conf import settings

from metrics import latency
from metrics.samples import Figures, Sample

Series = tuple[str, str]
# (ts, total, errors, latency histogram) of one series in one second.
Second = tuple[int, int, int, latency.Histogram]

SPANS = {"10s": 10, "1m": 60, "5m": 300}
LONGEST_SPAN = max(SPANS.values())


def keep_seconds() -> int:
    """How long seconds (and the memory of what was counted) are kept: the longest window,
    and at least as long as a sample may be late (older ones are refused at the door)."""
    return max(LONGEST_SPAN, settings.METRICS_MAX_AGE_SECONDS) + 60


class LiveWindows(ABC):
    @abstractmethod
    def accept(self, gateway: str, samples: list[Sample]) -> list[Sample]:
        """Count the samples not counted before for this gateway; answer those."""

    @abstractmethod
    def withdraw(self, gateway: str, samples: list[Sample]) -> None:
        """Undo `accept` of these samples (their rollup could not be stored)."""

    @abstractmethod
    def active(self, since: int) -> list[Series]:
        """Series with a sample at or after `since`."""

    @abstractmethod
    def seconds(self, series: list[Series], first: int, last: int) -> dict[Series, list[Second]]:
        """Each series' non-empty seconds in [first, last]."""

    @abstractmethod
    def ingested(self) -> int:
        """Samples counted since the store began (a Prometheus counter)."""

    @abstractmethod
    def claim(self, second: int) -> bool:
        """True for the first caller (of any process) that claims this second, and only if
        no later second was claimed: the live figures go out once per second."""

    def figures(self, now: int) -> dict[Series, dict[str, Figures]]:
        """Every active series' figures over each span ending at `now` (inclusive)."""
        shortest = min(SPANS.values())
        series = self.active(now - shortest + 1)
        per_second = self.seconds(series, now - LONGEST_SPAN + 1, now)
        answer: dict[Series, dict[str, Figures]] = {}
        for one in series:
            spans = {name: Figures() for name in SPANS}
            for ts, total, errors, histogram in per_second.get(one, []):
                for name, span in SPANS.items():
                    if ts > now - span:
                        spans[name].add(total, errors, histogram)
            answer[one] = spans
        return answer


@dataclass
class _MemorySecond:
    total: int = 0
    errors: int = 0
    histogram: latency.Histogram = field(default_factory=dict)
    gateways: set[str] = field(default_factory=set)


class MemoryWindows(LiveWindows):
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seconds: dict[Series, dict[int, _MemorySecond]] = defaultdict(dict)
        self._latest: dict[Series, int] = {}
        self._ingested = 0
        self._pruned_at = 0.0
        self._claimed = 0

    def accept(self, gateway, samples):
        new = []
        with self._lock:
            for sample in samples:
                second = self._seconds[sample.series].setdefault(sample.ts, _MemorySecond())
                if gateway in second.gateways:
                    continue
                second.gateways.add(gateway)
                self._add(second, sample, 1)
                self._latest[sample.series] = max(self._latest.get(sample.series, 0), sample.ts)
                new.append(sample)
            self._ingested += len(new)
            self._prune()
        return new

    def withdraw(self, gateway, samples):
        with self._lock:
            for sample in samples:
                second = self._seconds[sample.series].get(sample.ts)
                if second is not None and gateway in second.gateways:
                    second.gateways.discard(gateway)
                    self._add(second, sample, -1)
                    self._ingested -= 1

    @staticmethod
    def _add(second: _MemorySecond, sample: Sample, sign: int) -> None:
        second.total += sign * sample.total
        second.errors += sign * sample.errors
        if sample.bucket is not None:
            second.histogram[sample.bucket] = (
                second.histogram.get(sample.bucket, 0) + sign * sample.total
            )

    def _prune(self) -> None:
        now = time.time()
        if now - self._pruned_at < 10:
            return
        self._pruned_at = now
        oldest = int(now) - keep_seconds()
        for series in list(self._seconds):
            seconds = self._seconds[series]
            for ts in [ts for ts in seconds if ts < oldest]:
                del seconds[ts]
            if not seconds:
                del self._seconds[series]
                self._latest.pop(series, None)

    def active(self, since):
        with self._lock:
            return sorted(series for series, latest in self._latest.items() if latest >= since)

    def seconds(self, series, first, last):
        with self._lock:
            return {
                one: [
                    (ts, s.total, s.errors, dict(s.histogram))
                    for ts, s in sorted(self._seconds.get(one, {}).items())
                    if first <= ts <= last and (s.total or s.gateways)
                ]
                for one in series
            }

    def ingested(self):
        with self._lock:
            return self._ingested

    def claim(self, second):
        with self._lock:
            if second <= self._claimed:
                return False
            self._claimed = second
            return True


# Counts one sample atomically: remembers (gateway, ts) in the series' `seen` hash of that
# second and, only if it was not there, adds its figures to the second's hash. Redis runs a
# script alone, so two web processes never count one sample twice.
_ACCEPT = """
if redis.call('HSETNX', KEYS[1], ARGV[1], 1) == 0 then return 0 end
redis.call('EXPIRE', KEYS[1], ARGV[5])
redis.call('HINCRBY', KEYS[2], 't', ARGV[2])
redis.call('HINCRBY', KEYS[2], 'e', ARGV[3])
if ARGV[4] ~= '' then redis.call('HINCRBY', KEYS[2], 'b' .. ARGV[4], ARGV[2]) end
redis.call('EXPIRE', KEYS[2], ARGV[5])
redis.call('ZADD', KEYS[3], 'GT', ARGV[6], ARGV[7])
redis.call('INCR', KEYS[4])
return 1
"""
_WITHDRAW = """
if redis.call('HDEL', KEYS[1], ARGV[1]) == 0 then return 0 end
redis.call('HINCRBY', KEYS[2], 't', 0 - tonumber(ARGV[2]))
redis.call('HINCRBY', KEYS[2], 'e', 0 - tonumber(ARGV[3]))
if ARGV[4] ~= '' then redis.call('HINCRBY', KEYS[2], 'b' .. ARGV[4], 0 - tonumber(ARGV[2])) end
redis.call('DECR', KEYS[4])
return 1
"""

_CLAIM = """
if tonumber(redis.call('GET', KEYS[1]) or '0') >= tonumber(ARGV[1]) then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'EX', 3600)
return 1
"""


class RedisWindows(LiveWindows):
    def __init__(self, url: str, prefix: str) -> None:
        self.redis = redis.Redis.from_url(url, socket_timeout=5)
        self.prefix = f"{prefix}:metrics"
        self._accept = self.redis.register_script(_ACCEPT)
        self._withdraw = self.redis.register_script(_WITHDRAW)
        self._claim = self.redis.register_script(_CLAIM)

    def _series_key(self, series: Series) -> str:
        return json.dumps(series, separators=(",", ":"))

    def _keys(self, sample: Sample) -> list[str]:
        series = self._series_key(sample.series)
        return [
            f"{self.prefix}:seen:{series}:{sample.ts}",
            f"{self.prefix}:sec:{series}:{sample.ts}",
            f"{self.prefix}:active",
            f"{self.prefix}:ingested",
        ]

    def _run(self, script, gateway: str, samples: list[Sample]) -> list[int]:
        ttl = keep_seconds()
        pipe = self.redis.pipeline(transaction=False)
        for sample in samples:
            bucket = "" if sample.bucket is None else str(sample.bucket)
            args = [gateway, sample.total, sample.errors, bucket, ttl, sample.ts]
            script(self._keys(sample), [*args, self._series_key(sample.series)], client=pipe)
        return pipe.execute()

    def accept(self, gateway, samples):
        if not samples:
            return []
        counted = self._run(self._accept, gateway, samples)
        return [sample for sample, new in zip(samples, counted, strict=True) if new]

    def withdraw(self, gateway, samples):
        if samples:
            self._run(self._withdraw, gateway, samples)

    def active(self, since):
        key = f"{self.prefix}:active"
        pipe = self.redis.pipeline(transaction=False)
        pipe.zremrangebyscore(key, "-inf", int(time.time()) - keep_seconds())
        pipe.zrangebyscore(key, since, "+inf")
        _, members = pipe.execute()
        return sorted(tuple(json.loads(member)) for member in members)

    def seconds(self, series, first, last):
        pipe = self.redis.pipeline(transaction=False)
        wanted = [(one, ts) for one in series for ts in range(first, last + 1)]
        for one, ts in wanted:
            pipe.hgetall(f"{self.prefix}:sec:{self._series_key(one)}:{ts}")
        answer: dict[Series, list[Second]] = {one: [] for one in series}
        for (one, ts), fields in zip(wanted, pipe.execute(), strict=True):
            if not fields:
                continue
            histogram = {
                int(name[1:]): int(value)
                for name, value in fields.items()
                if name.startswith(b"b") and int(value)
            }
            answer[one].append((ts, int(fields[b"t"]), int(fields[b"e"]), histogram))
        return answer

    def ingested(self):
        return int(self.redis.get(f"{self.prefix}:ingested") or 0)

    def claim(self, second):
        return self._claim(keys=[f"{self.prefix}:claimed"], args=[second]) == 1


_configured: LiveWindows | None = None
_configured_lock = threading.Lock()


def store() -> LiveWindows:
    """The installation's live windows (REDIS_URL decides which backend)."""
    global _configured
    with _configured_lock:
        if _configured is None:
            _configured = (
                RedisWindows(settings.REDIS_URL, settings.REDIS_PREFIX)
                if settings.REDIS_URL
                else MemoryWindows()
            )
        return _configured
