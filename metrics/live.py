"""Live windows: the last minutes of samples per (service, version) and second, for the
sliding 10 s / 1 min / 5 min figures that /ws/live/ shows, and per gateway as well, for
the release analysis (which counts the figures of some gateways only).

One interface, two backends: Redis when REDIS_URL is set (every web process and the worker
see the same windows; keys under REDIS_PREFIX), process memory otherwise (the default mode
runs everything in one process). Both remember each (gateway, service, version, lane, ts)
they have counted, with that gateway's figures, so a re-sent sample is counted once, and
`accept` answers the samples that were new: only those go on to the rollups. A gateway sends
one sample per lane of a (service, version) and second (metrics/samples.py); the windows add
them up into the series (service, version): the split by lane is the rollups' (they keep
the lane), and the release analysis and the live figures count every lane together.

Samples that split their requests by the instance that answered (`Sample.instances`) are
counted by instance too, per service and second, for the service page's per-instance
traffic (`by_instance`): only those `accept` counts, and `withdraw` takes them off again.

The series (service, version) with a sample in the last keep_seconds() are at most
METRICS_MAX_SERIES: a sample that would start one more is not counted (`accept` answers it
apart), so neither these windows nor what is read from them (/metrics, /ws/live/) grow
without bound whatever gateways send.
"""

import json
import threading
import time
from abc import ABC, abstractmethod
from collections import defaultdict
from dataclasses import dataclass, field
from typing import NamedTuple

import redis
from django.conf import settings
from redis.commands.core import Script

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


class Counted(NamedTuple):
    new: list[Sample]  # counted now
    over_cap: list[Sample]  # not counted: they would start a series beyond METRICS_MAX_SERIES


class LiveWindows(ABC):
    @abstractmethod
    def accept(self, gateway: str, samples: list[Sample]) -> Counted:
        """Count the samples not counted before for this gateway, within the series cap;
        the others were counted before (re-sent)."""

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
    def by_gateway(
        self, series: list[Series], first: int, last: int
    ) -> dict[Series, dict[str, Figures]]:
        """Each series' figures over the seconds [first, last], per gateway that reported."""

    @abstractmethod
    def by_instance(self, service: str, first: int, last: int) -> dict[str, Figures]:
        """The service's requests over the seconds [first, last], by the address of the
        instance that answered them (the samples that told)."""

    @abstractmethod
    def ingested(self) -> int:
        """Samples counted since the store began (a Prometheus counter)."""

    @abstractmethod
    def claim(self, second: int) -> bool:
        """True for the first caller (of any process) that claims this second, and only if
        no later second was claimed: the live figures go out once per second."""

    def figures(self, now: int) -> dict[Series, dict[str, Figures]]:
        """The figures over each span ending at `now` (inclusive) of every series with a
        sample in the longest: one gone quiet is there, its windows emptying, until its
        last sample is out of them all (the pages' 5 minutes and last minute count down
        with the server's rather than stay at their last update)."""
        series = self.active(now - LONGEST_SPAN + 1)
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


def _histogram(total: int, bucket: int | None) -> latency.Histogram:
    return {} if bucket is None else {bucket: total}


def _reporter(gateway: str, sample: Sample) -> str:
    """Who reported a sample, as a second remembers it (to count it once): the gateway, and
    the sample's lane when it has one (a gateway reports each lane of a series apart).
    Gateway names are slugs and lane names hold no space, so a space parts the two."""
    return gateway if sample.lane is None else f"{gateway} {sample.lane}"


def _gateway_of(reporter: str) -> str:
    return reporter.partition(" ")[0]


# One gateway's sample of one second: (total, errors, latency bucket or None).
_Reported = tuple[int, int, int | None]


@dataclass
class _MemorySecond:
    total: int = 0
    errors: int = 0
    histogram: latency.Histogram = field(default_factory=dict)
    reported: dict[str, _Reported] = field(default_factory=dict)  # by _reporter


class MemoryWindows(LiveWindows):
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seconds: dict[Series, dict[int, _MemorySecond]] = defaultdict(dict)
        # service -> ts -> address -> [total, errors]
        self._instances: dict[str, dict[int, dict[str, list[int]]]] = defaultdict(dict)
        self._latest: dict[Series, int] = {}
        self._ingested = 0
        self._pruned_at = 0.0
        self._forgot_at = 0.0
        self._claimed = 0

    def accept(self, gateway: str, samples: list[Sample]) -> Counted:
        new, over_cap = [], []
        with self._lock:
            self._prune()
            for sample in samples:
                if not self._room_for(sample.series):
                    over_cap.append(sample)
                    continue
                second = self._seconds[sample.series].setdefault(sample.ts, _MemorySecond())
                reporter = _reporter(gateway, sample)
                if reporter in second.reported:
                    continue
                second.reported[reporter] = (sample.total, sample.errors, sample.bucket)
                self._add(second, sample, 1)
                self._add_instances(sample, 1)
                self._latest[sample.series] = max(self._latest.get(sample.series, 0), sample.ts)
                new.append(sample)
            self._ingested += len(new)
        return Counted(new, over_cap)

    def _room_for(self, series: Series) -> bool:
        if series in self._latest or len(self._latest) < settings.METRICS_MAX_SERIES:
            return True
        # Full: forget the series gone quiet, at most once a second (a flood of new series
        # must not make every sample walk them all).
        now = time.time()
        if now - self._forgot_at >= 1:
            self._forgot_at = now
            self._forget_quiet(int(now) - keep_seconds())
        return len(self._latest) < settings.METRICS_MAX_SERIES

    def withdraw(self, gateway: str, samples: list[Sample]) -> None:
        with self._lock:
            for sample in samples:
                second = self._seconds.get(sample.series, {}).get(sample.ts)
                reporter = _reporter(gateway, sample)
                if second is not None and second.reported.pop(reporter, None) is not None:
                    self._add(second, sample, -1)
                    self._add_instances(sample, -1)
                    self._ingested -= 1

    @staticmethod
    def _add(second: _MemorySecond, sample: Sample, sign: int) -> None:
        second.total += sign * sample.total
        second.errors += sign * sample.errors
        if sample.bucket is not None:
            second.histogram[sample.bucket] = (
                second.histogram.get(sample.bucket, 0) + sign * sample.total
            )

    def _add_instances(self, sample: Sample, sign: int) -> None:
        if not sample.instances:
            return
        second = self._instances[sample.service].setdefault(sample.ts, {})
        for address, total, errors in sample.instances:
            counts = second.setdefault(address, [0, 0])
            counts[0] += sign * total
            counts[1] += sign * errors

    def _prune(self) -> None:
        now = time.time()
        if now - self._pruned_at < 10:
            return
        self._pruned_at = now
        oldest = int(now) - keep_seconds()
        for service in list(self._instances):
            by_second = self._instances[service]
            for ts in [ts for ts in by_second if ts < oldest]:
                del by_second[ts]
            if not by_second:
                del self._instances[service]
        for series in list(self._seconds):
            seconds = self._seconds[series]
            for ts in [ts for ts in seconds if ts < oldest]:
                del seconds[ts]
            if not seconds:
                del self._seconds[series]
                self._latest.pop(series, None)

    def _forget_quiet(self, oldest: int) -> None:
        """Drop the series with no second at or after `oldest`."""
        for series in [series for series, latest in self._latest.items() if latest < oldest]:
            del self._latest[series]
            self._seconds.pop(series, None)

    def active(self, since: int) -> list[Series]:
        with self._lock:
            return sorted(series for series, latest in self._latest.items() if latest >= since)

    def seconds(self, series: list[Series], first: int, last: int) -> dict[Series, list[Second]]:
        with self._lock:
            return {
                one: [
                    (ts, s.total, s.errors, dict(s.histogram))
                    for ts, s in sorted(self._seconds.get(one, {}).items())
                    if first <= ts <= last and (s.total or s.reported)
                ]
                for one in series
            }

    def by_gateway(
        self, series: list[Series], first: int, last: int
    ) -> dict[Series, dict[str, Figures]]:
        answer: dict[Series, dict[str, Figures]] = {}
        with self._lock:
            for one in series:
                per_gateway: dict[str, Figures] = defaultdict(Figures)
                for ts, second in self._seconds.get(one, {}).items():
                    if first <= ts <= last:
                        for reporter, (total, errors, bucket) in second.reported.items():
                            per_gateway[_gateway_of(reporter)].add(
                                total, errors, _histogram(total, bucket)
                            )
                answer[one] = dict(per_gateway)
        return answer

    def by_instance(self, service: str, first: int, last: int) -> dict[str, Figures]:
        answer: dict[str, Figures] = defaultdict(Figures)
        with self._lock:
            for ts, second in self._instances.get(service, {}).items():
                if first <= ts <= last:
                    for address, (total, errors) in second.items():
                        answer[address].add(total, errors, {})
        return {address: figures for address, figures in answer.items() if figures.total}

    def ingested(self) -> int:
        with self._lock:
            return self._ingested

    def claim(self, second: int) -> bool:
        with self._lock:
            if second <= self._claimed:
                return False
            self._claimed = second
            return True


# Counts one sample atomically: remembers the gateway's figures under its name (ARGV[1],
# with the sample's lane: _reporter) in the series' `gw` hash of that second (KEYS[1]) and,
# only if it was not there, adds them to the second's hash (KEYS[2]), and the sample's
# requests by instance (ARGV[10...]: address, total, errors) to the service's (KEYS[5]). A
# sample of a series not in `active` (KEYS[3]) is refused (2) while `active` holds
# METRICS_MAX_SERIES (ARGV[8]) series, even once those quiet since ARGV[9] are dropped. Redis
# runs a script alone, so two web processes never count one sample twice, nor let two new
# series in past the cap.
_ACCEPT = """
if not redis.call('ZSCORE', KEYS[3], ARGV[7])
    and redis.call('ZCARD', KEYS[3]) >= tonumber(ARGV[8]) then
  redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', ARGV[9])
  if redis.call('ZCARD', KEYS[3]) >= tonumber(ARGV[8]) then return 2 end
end
if redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[2] .. ' ' .. ARGV[3] .. ' ' .. ARGV[4]) == 0 then
  return 0
end
redis.call('EXPIRE', KEYS[1], ARGV[5])
redis.call('HINCRBY', KEYS[2], 't', ARGV[2])
redis.call('HINCRBY', KEYS[2], 'e', ARGV[3])
if ARGV[4] ~= '' then redis.call('HINCRBY', KEYS[2], 'b' .. ARGV[4], ARGV[2]) end
redis.call('EXPIRE', KEYS[2], ARGV[5])
redis.call('ZADD', KEYS[3], 'GT', ARGV[6], ARGV[7])
redis.call('INCR', KEYS[4])
for i = 10, #ARGV, 3 do
  redis.call('HINCRBY', KEYS[5], 't ' .. ARGV[i], ARGV[i + 1])
  redis.call('HINCRBY', KEYS[5], 'e ' .. ARGV[i], ARGV[i + 2])
end
if #ARGV >= 10 then redis.call('EXPIRE', KEYS[5], ARGV[5]) end
return 1
"""
_WITHDRAW = """
if redis.call('HDEL', KEYS[1], ARGV[1]) == 0 then return 0 end
redis.call('HINCRBY', KEYS[2], 't', 0 - tonumber(ARGV[2]))
redis.call('HINCRBY', KEYS[2], 'e', 0 - tonumber(ARGV[3]))
if ARGV[4] ~= '' then redis.call('HINCRBY', KEYS[2], 'b' .. ARGV[4], 0 - tonumber(ARGV[2])) end
redis.call('DECR', KEYS[4])
for i = 10, #ARGV, 3 do
  redis.call('HINCRBY', KEYS[5], 't ' .. ARGV[i], 0 - tonumber(ARGV[i + 1]))
  redis.call('HINCRBY', KEYS[5], 'e ' .. ARGV[i], 0 - tonumber(ARGV[i + 2]))
end
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
            f"{self.prefix}:gw:{series}:{sample.ts}",
            f"{self.prefix}:sec:{series}:{sample.ts}",
            f"{self.prefix}:active",
            f"{self.prefix}:ingested",
            f"{self.prefix}:inst:{json.dumps(sample.service)}:{sample.ts}",
        ]

    def _run(self, script: Script, gateway: str, samples: list[Sample]) -> list[int]:
        ttl = keep_seconds()
        cap = [settings.METRICS_MAX_SERIES, int(time.time()) - ttl]
        pipe = self.redis.pipeline(transaction=False)
        for sample in samples:
            bucket = "" if sample.bucket is None else str(sample.bucket)
            reporter = _reporter(gateway, sample)
            args: list[str | int] = [reporter, sample.total, sample.errors, bucket, ttl, sample.ts]
            shares = [part for share in sample.instances for part in share]
            script(
                self._keys(sample),
                [*args, self._series_key(sample.series), *cap, *shares],
                client=pipe,
            )
        return pipe.execute()

    def accept(self, gateway: str, samples: list[Sample]) -> Counted:
        if not samples:
            return Counted([], [])
        outcomes = self._run(self._accept, gateway, samples)
        pairs = list(zip(samples, outcomes, strict=True))
        return Counted(
            [sample for sample, outcome in pairs if outcome == 1],
            [sample for sample, outcome in pairs if outcome == 2],
        )

    def withdraw(self, gateway: str, samples: list[Sample]) -> None:
        if samples:
            self._run(self._withdraw, gateway, samples)

    def active(self, since: int) -> list[Series]:
        key = f"{self.prefix}:active"
        pipe = self.redis.pipeline(transaction=False)
        pipe.zremrangebyscore(key, "-inf", int(time.time()) - keep_seconds())
        pipe.zrangebyscore(key, since, "+inf")
        _, members = pipe.execute()
        return sorted(tuple(json.loads(member)) for member in members)

    def seconds(self, series: list[Series], first: int, last: int) -> dict[Series, list[Second]]:
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

    def by_gateway(
        self, series: list[Series], first: int, last: int
    ) -> dict[Series, dict[str, Figures]]:
        pipe = self.redis.pipeline(transaction=False)
        wanted = [(one, ts) for one in series for ts in range(first, last + 1)]
        for one, ts in wanted:
            pipe.hgetall(f"{self.prefix}:gw:{self._series_key(one)}:{ts}")
        answer: dict[Series, dict[str, Figures]] = {one: defaultdict(Figures) for one in series}
        for (one, _), reported in zip(wanted, pipe.execute(), strict=True):
            for reporter, value in reported.items():
                total, errors, bucket = value.split(b" ")  # as _ACCEPT writes it
                histogram = _histogram(int(total), int(bucket) if bucket else None)
                answer[one][_gateway_of(reporter.decode())].add(int(total), int(errors), histogram)
        return {one: dict(per_gateway) for one, per_gateway in answer.items()}

    def by_instance(self, service: str, first: int, last: int) -> dict[str, Figures]:
        pipe = self.redis.pipeline(transaction=False)
        for ts in range(first, last + 1):
            pipe.hgetall(f"{self.prefix}:inst:{json.dumps(service)}:{ts}")
        answer: dict[str, Figures] = defaultdict(Figures)
        for second in pipe.execute():
            for name, value in second.items():
                kind, _, address = name.decode().partition(" ")  # as _ACCEPT writes it
                if kind == "t":
                    answer[address].add(int(value), 0, {})
                else:
                    answer[address].add(0, int(value), {})
        return {address: figures for address, figures in answer.items() if figures.total}

    def ingested(self) -> int:
        return int(self.redis.get(f"{self.prefix}:ingested") or 0)

    def claim(self, second: int) -> bool:
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
