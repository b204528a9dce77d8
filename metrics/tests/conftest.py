import time
import uuid

import pytest
from django.conf import settings
from django.utils import timezone
from rest_framework.test import APIClient

from gateways import generation
from gateways.models import Gateway
from metrics import live
from registry_sync.models import Service

BACKENDS = [
    "memory",
    pytest.param(
        "redis",
        marks=pytest.mark.skipif(
            not settings.REDIS_URL, reason="needs REDIS_URL (CI sets it): the Redis backend"
        ),
    ),
]


@pytest.fixture(params=BACKENDS)
def windows(request, monkeypatch):
    """The installation's live windows, on each backend in turn (a fresh, empty store)."""
    if request.param == "memory":
        store: live.LiveWindows = live.MemoryWindows()
    else:
        store = live.RedisWindows(settings.REDIS_URL, f"{settings.REDIS_PREFIX}-{uuid.uuid4().hex}")
    monkeypatch.setattr(live, "_configured", store)
    yield store
    if isinstance(store, live.RedisWindows):
        keys = list(store.redis.scan_iter(f"{store.prefix}:*"))
        if keys:
            store.redis.delete(*keys)


@pytest.fixture
def gateway(db):
    """(name, an APIClient with that gateway's token): gw-1, which runs a gateway document
    holding user-app (so it fronts user-app), as a pull gateway that just polled."""
    Service.objects.get_or_create(name="user-app")
    gateway, token, _ = Gateway.objects.create_with_credentials(
        name="gw-1",
        mode=Gateway.PULL,
        acked_generation=generation.bump("test"),
        last_seen=timezone.now(),
    )
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    return gateway.name, client


def sample(ts=None, service="user-app", version="V1", total=100, errors=0, p95=12.5, **more):
    return {
        "service": service,
        "version": version,
        "ts": int(time.time()) if ts is None else ts,
        "window_s": 1,
        "total": total,
        "errors": errors,
        "latency_ms_p95": p95,
        **more,
    }


def post(client, name, *samples):
    return client.post(
        "/api/v1/metrics/", {"gateway": name, "samples": list(samples)}, format="json"
    )
