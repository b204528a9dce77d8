"""The latency a gateway reports is the one its requests took: above zero and below what the
client saw, to a fraction of a millisecond on loopback, and at least the upstream's delay
when the upstream is slow. A real gateway process reads its own /-/metrics gauge (each
one-second window's p95), which Prometheus scrapes and the dashboard's series show."""

import re
import threading
import time

import httpx
import pytest

from testing.gateway_lab import SLOW_SECONDS, SLOW_SUFFIX
from tests.test_gateway_routing import SEED_RULES

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]
GAUGE = re.compile(
    rb'graylane_gateway_latency_p95_ms\{lane="",service="user-app",version="V1"\} (\S+)'
)


class GaugeWatch:
    """Every value the gateway's p95 gauge takes while the block runs (it changes once a
    second, when a window with traffic closes), read five times a second."""

    def __init__(self, gateway):
        self.url = gateway.url + "/-/metrics"
        self.values: list[float] = []
        self._stop = threading.Event()

    def _read(self) -> float | None:
        match = GAUGE.search(httpx.get(self.url, timeout=2).content)
        return float(match.group(1)) if match else None

    def _watch(self) -> None:
        last = None
        while not self._stop.wait(0.2):
            value = self._read()
            if value is not None and value != last:
                self.values.append(value)
                last = value

    def __enter__(self) -> "GaugeWatch":
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        time.sleep(1.5)  # the last window closes
        self._stop.set()
        self._thread.join(5)


def timed_requests(gateway, path: str, count: int) -> list[float]:
    """Each request's time as the client saw it, in ms, over one kept-alive connection."""
    seen = []
    with httpx.Client(base_url=gateway.url, timeout=5) as client:
        for _ in range(count):
            started = time.perf_counter()
            assert client.get(path).status_code == 200
            seen.append(1000 * (time.perf_counter() - started))
    return seen


def test_sub_millisecond_requests_are_measured_to_a_fraction_of_a_millisecond(lab):
    lab.instance("user-app", "V1")
    lab.sync()
    lab.policy(**SEED_RULES)
    gateway = lab.start_gateway()
    with GaugeWatch(gateway) as gauge:
        client_ms = []
        for _ in range(3):  # three windows
            client_ms += timed_requests(gateway, "/user-app/hello", 60)
            time.sleep(1.1)
    assert gauge.values, "the gateway reported no latency"
    # Each request took the gateway less time than the client that sent it, so each window's
    # p95 lies above zero and below the slowest request the client saw.
    assert all(0 < p95 < max(client_ms) for p95 in gauge.values), (gauge.values, max(client_ms))
    # A millisecond clock (the event loop's) reports whole milliseconds, mostly 0 or 1.
    assert any(not p95.is_integer() for p95 in gauge.values), gauge.values


def test_slow_requests_are_measured_at_least_as_slow_as_the_upstream(lab):
    lab.instance("user-app", "V1")
    lab.sync()
    lab.policy(**SEED_RULES)
    gateway = lab.start_gateway()
    with GaugeWatch(gateway) as gauge:
        client_ms = timed_requests(gateway, "/user-app/hello" + SLOW_SUFFIX, 40)
    assert gauge.values, "the gateway reported no latency"
    assert all(1000 * SLOW_SECONDS <= p95 < max(client_ms) for p95 in gauge.values), (
        gauge.values,
        max(client_ms),
    )
