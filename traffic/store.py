"""Where sampled requests wait for a preview or a replay: a window of recent samples per
service, bounded in time and count, in memory (this process) or in Redis (every replica)."""

import threading
import time
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Iterable

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
    def window(self, service: str | None = None, now: float | None = None) -> list[TrafficSample]:
        """The samples of the window (of one service, or all), oldest first."""


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
        with self._lock:
            self._expire(time.time() if now is None else now)
            held = sum(len(q) for q in self._by_service.values())
            for sample in samples:
                queue = self._by_service.setdefault(sample.service, deque())
                if len(queue) >= self.per_service or held >= self.in_all:
                    continue
                queue.append(sample)
                held += 1
                kept += 1
        return kept

    def window(self, service: str | None = None, now: float | None = None) -> list[TrafficSample]:
        with self._lock:
            self._expire(time.time() if now is None else now)
            if service is not None:
                return list(self._by_service.get(service, ()))
            found = [s for queue in self._by_service.values() for s in queue]
        found.sort(key=lambda s: s.ts)
        return found

    def _expire(self, now: float) -> None:
        oldest = now - self.window_seconds
        for name in list(self._by_service):
            queue = self._by_service[name]
            while queue and queue[0].ts < oldest:
                queue.popleft()
            if not queue:
                del self._by_service[name]


_configured: SampleStore | None = None
_configured_lock = threading.Lock()


def store() -> SampleStore:
    global _configured
    with _configured_lock:
        if _configured is None:
            _configured = MemorySampleStore()
        return _configured
