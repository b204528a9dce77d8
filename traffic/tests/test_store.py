from traffic.samples import TrafficSample
from traffic.store import MemorySampleStore


def sample(ts: float, service: str = "user-app") -> TrafficSample:
    return TrafficSample(ts=ts, service=service, method="GET", path="/hello", ip="10.0.0.1")


def test_samples_leave_the_window_once_it_has_passed():
    kept = MemorySampleStore(window_seconds=900)
    kept.accept([sample(1000.0), sample(1500.0)], now=1500.0)
    assert [s.ts for s in kept.window("user-app", now=1800.0)] == [1000.0, 1500.0]
    assert [s.ts for s in kept.window("user-app", now=1901.0)] == [1500.0]
    assert kept.window(now=2401.0) == []


def test_the_caps_drop_what_is_over_them():
    kept = MemorySampleStore(per_service=2, in_all=3)
    assert kept.accept([sample(1.0), sample(2.0), sample(3.0)], now=3.0) == 2
    assert kept.accept([sample(4.0, "order-app"), sample(5.0, "order-app")], now=5.0) == 1
    assert len(kept.window(now=5.0)) == 3
