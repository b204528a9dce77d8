"""Sampled requests for the dashboard's previews and replays (`POST /api/v1/traffic-samples/`,
docs/gateway-protocol.md, "Traffic samples"): a share of the proxied requests, at most so
many a second, with the attributes the gray decision read and how the request went.

Personal data (client IP, user, the rule headers): a sample holds only what some rule of
the running configuration reads, waits in a bounded buffer (the oldest dropped and counted
when it is full, as when the dashboard cannot be reached for long) and is sent by the
metric reporter's loop, never on a request's path.
"""

from __future__ import annotations

import random
import time
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

# Samples waiting to be sent: a minute at the default cap, then the oldest go.
BUFFER = 12_000
# One POST: at most so many samples and about so many bytes, under the dashboard's
# METRICS_MAX_SAMPLES (1000) and METRICS_MAX_BODY_BYTES (256 KiB). A request head may be
# 72 KiB, so one sample always fits.
BATCH = 500
BATCH_BYTES = 160 * 1024


class Sampler:
    def __init__(
        self,
        rate: float,
        cap: int,
        buffer: int = BUFFER,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.rate = rate
        self.cap = cap
        self.clock = clock
        self.waiting: deque[dict[str, Any]] = deque(maxlen=buffer)
        self.dropped = 0  # samples lost to a full buffer since the start
        self.sending = 0  # taken, the dashboard's answer not yet in: still waiting
        self._second = 0
        self._taken = 0  # samples taken in `_second`

    def wants(self) -> bool:
        """Whether to sample the request now arriving: one in 1/rate, at most `cap` a
        second."""
        if random.random() >= self.rate:
            return False
        second = int(self.clock())
        if second != self._second:
            self._second, self._taken = second, 0
        if self._taken >= self.cap:
            return False
        self._taken += 1
        return True

    def record(self, sample: dict[str, Any]) -> None:
        if len(self.waiting) == self.waiting.maxlen:
            self.dropped += 1
        self.waiting.append(sample)

    def take(self) -> list[dict[str, Any]]:
        """The oldest waiting samples, at most a batch."""
        waiting = self.waiting
        batch: list[dict[str, Any]] = []
        size = 0
        while waiting and len(batch) < BATCH:
            size += _size(waiting[0])
            if batch and size > BATCH_BYTES:
                break
            batch.append(waiting.popleft())
        self.sending += len(batch)
        return batch

    def sent(self, batch: list[dict[str, Any]]) -> None:
        """The dashboard answered for a batch taken (took it, or refused it for good)."""
        self.sending -= len(batch)

    def put_back(self, batch: list[dict[str, Any]]) -> None:
        """A batch the dashboard did not take, to be sent again: before the samples that
        came since, as far as the buffer has room (the oldest of it are dropped)."""
        waiting = self.waiting
        assert waiting.maxlen is not None
        self.sending -= len(batch)
        room = waiting.maxlen - len(waiting)
        kept = batch[len(batch) - room :] if room < len(batch) else batch
        self.dropped += len(batch) - len(kept)
        waiting.extendleft(reversed(kept))


def _size(sample: dict[str, Any]) -> int:
    """About the bytes of the sample's JSON: its texts, and room for the rest."""
    texts = (sample["path"], sample["user"] or "", sample["city"] or "", *sample["headers"])
    return 200 + sum(map(len, texts)) + sum(map(len, sample["headers"].values()))


class SamplerCollector:
    """The sampler's buffer in the gateway's Prometheus text (/-/metrics)."""

    def __init__(self, sampler: Sampler):
        self.sampler = sampler

    def collect(self) -> Iterator:
        yield GaugeMetricFamily(
            "graylane_gateway_samples_waiting",
            "Sampled requests not yet taken by the dashboard (waiting, or on their way).",
            value=len(self.sampler.waiting) + self.sampler.sending,
        )
        yield CounterMetricFamily(
            "graylane_gateway_samples_dropped",
            "Sampled requests dropped unsent: the buffer was full.",
            value=self.sampler.dropped,
        )
