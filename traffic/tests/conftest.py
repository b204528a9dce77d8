import uuid

import pytest
from django.conf import settings

from traffic import store as stores

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
