import time

import pytest
from django.conf import settings

from traffic.samples import TrafficSample
from traffic.store import RedisSampleStore
from traffic.tests.conftest import BACKENDS, drop, make_store


def sample(ts: float, service: str = "user-app", **more) -> TrafficSample:
    return TrafficSample(ts=ts, service=service, method="GET", path="/hello", ip="10.0.0.1", **more)


@pytest.fixture
def bounded(backend):
    made = []

    def make(**bounds):
        made.append(make_store(backend, **bounds))
        return made[-1]

    yield make
    for store in made:
        drop(store)


def test_samples_leave_the_window_once_it_has_passed(bounded):
    kept = bounded(window_seconds=900)
    kept.accept([sample(1000.0), sample(1500.0)], now=1500.0)
    assert [s.ts for s in kept.window("user-app", now=1800.0)] == [1000.0, 1500.0]
    assert [s.ts for s in kept.window("user-app", now=1901.0)] == [1500.0]
    assert kept.window(now=2401.0) == []
    # A sample already out of the window is not kept at all.
    assert kept.accept([sample(1000.0)], now=2401.0) == 0


def test_the_caps_drop_what_is_over_them(bounded):
    kept = bounded(per_service=2, in_all=3)
    assert kept.accept([sample(1.0), sample(2.0), sample(3.0)], now=3.0) == 2
    assert kept.accept([sample(4.0, "order-app"), sample(5.0, "order-app")], now=5.0) == 1
    assert len(kept.window(now=5.0)) == 3
    # Room comes back as samples leave the window.
    assert kept.accept([sample(5.0 + 15 * 60, "order-app")], now=5.5 + 15 * 60) == 1


def test_a_sample_comes_back_as_it_went_in_and_identical_requests_count_twice(bounded):
    kept = bounded()
    now = time.time()
    full = sample(now, user="1001", city="Paris", headers={"gray": "gray-996"}, status=503)
    assert kept.accept([full, full, sample(now - 1, "order-app")]) == 3
    assert kept.window("user-app") == [full, full]
    assert [s.service for s in kept.window()] == ["order-app", "user-app", "user-app"]


@pytest.mark.parametrize("backend", [BACKENDS[1]])
def test_redis_keys_expire_with_the_window_even_if_nobody_reads(bounded):
    kept = bounded(window_seconds=60)
    assert isinstance(kept, RedisSampleStore)
    kept.accept([sample(time.time())])
    keys = list(kept.redis.scan_iter(f"{kept.prefix}:*"))
    assert len(keys) == 3  # the service's batches, their index, the index of services
    assert all(0 < kept.redis.ttl(key) <= 60 for key in keys)


@pytest.mark.parametrize("backend", [BACKENDS[1]])
def test_replicas_share_the_redis_window(bounded):
    one = bounded(window_seconds=60)
    assert isinstance(one, RedisSampleStore)
    other = RedisSampleStore(settings.REDIS_URL, one.prefix.removesuffix(":traffic"), 60)
    now = time.time()
    one.accept([sample(now - 70), sample(now - 30)], now=now - 25)
    assert [s.ts for s in other.window("user-app", now=now)] == [now - 30]
    other.accept([sample(now - 1)], now=now)
    assert [s.ts for s in one.window(now=now)] == [now - 30, now - 1]
    assert [s.ts for s in one.window(now=now + 40)] == [now - 1]


@pytest.mark.parametrize("backend", [BACKENDS[1]])
def test_the_copies_a_process_read_from_redis_leave_with_the_window(bounded):
    kept = bounded(window_seconds=60)
    assert isinstance(kept, RedisSampleStore)
    now = time.time()
    kept.accept([sample(now)], now=now)
    assert len(kept.window("user-app", now=now)) == 1
    assert kept._read
    # Another service read after the window: user-app's copy goes too.
    assert kept.window("order-app", now=now + 61) == []
    assert not kept._read


def test_the_whole_window_comes_oldest_first_unless_asked_unordered(bounded):
    kept = bounded()
    kept.accept([sample(3.0, "order-app"), sample(4.0, "order-app")], now=10.0)
    kept.accept([sample(1.0), sample(2.0), sample(5.0)], now=10.0)
    assert [s.ts for s in kept.window(now=10.0)] == [1.0, 2.0, 3.0, 4.0, 5.0]
    unordered = kept.window(now=10.0, ordered=False)
    assert sorted(s.ts for s in unordered) == [1.0, 2.0, 3.0, 4.0, 5.0]
