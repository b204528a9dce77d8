import time
import uuid

import pytest
from django.conf import settings

from traffic import store as stores
from traffic.samples import TrafficSample

BACKENDS = [
    "memory",
    pytest.param(
        "redis",
        marks=pytest.mark.skipif(
            not settings.REDIS_URL, reason="needs REDIS_URL (CI sets it): the Redis store"
        ),
    ),
]


def make_store(backend: str, **bounds) -> stores.SampleStore:
    if backend == "memory":
        return stores.MemorySampleStore(**bounds)
    prefix = f"{settings.REDIS_PREFIX}-{uuid.uuid4().hex}"
    return stores.RedisSampleStore(settings.REDIS_URL, prefix, **bounds)


def drop(store: stores.SampleStore) -> None:
    if isinstance(store, stores.RedisSampleStore):
        keys = list(store.redis.scan_iter(f"{store.prefix}:*"))
        if keys:
            store.redis.delete(*keys)


@pytest.fixture(params=BACKENDS)
def backend(request) -> str:
    return request.param


@pytest.fixture
def kept(backend, monkeypatch):
    """The installation's sample store, on each backend in turn (fresh and empty)."""
    store = make_store(backend)
    monkeypatch.setattr(stores, "_configured", store)
    yield store
    drop(store)


# The live policy the impact previews start from (the API's and the editors').
PREVIEW_LIVE = {
    "enabled": True,
    "routing": True,
    "header": {"name": "x-gray", "value": "on"},
    "ips": [],
    "cities": [],
    "users": ["1001"],
    "user_header": "X-User-No",
    "city_header": "X-City",
    "percent": 0,
    "versions": {"prod": "V1", "gray": "V2"},
}


@pytest.fixture
def samples(monkeypatch):
    """The process's sample store, empty; `samples.add(n, **fields)` puts n samples in it."""
    kept = stores.MemorySampleStore()
    monkeypatch.setattr(stores, "_configured", kept)

    def add(n: int, service: str = "user-app", **fields) -> None:
        fields = {"ip": "192.0.2.9", "city": "Berlin", **fields}
        now = time.time()
        kept.accept(
            [TrafficSample(ts=now, service=service, method="GET", path="/", **fields)] * n,
            now=now,
        )

    kept.add = add
    return kept
