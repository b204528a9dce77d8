"""Liveness and readiness probes for load balancers and orchestrators."""

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import connection
from django.http import JsonResponse


def healthz(request):
    return JsonResponse({"status": "ok"})


def _check_database():
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")


def _check_broker():
    if settings.REDIS_URL:
        import redis

        redis.Redis.from_url(settings.REDIS_URL, socket_timeout=2).ping()


def _check_channel_layer():
    layer = get_channel_layer()
    async_to_sync(layer.group_send)("readyz", {"type": "readyz.ping"})


def readyz(request):
    failures = {}
    for name, check in (
        ("database", _check_database),
        ("broker", _check_broker),
        ("channel_layer", _check_channel_layer),
    ):
        try:
            check()
        except Exception as exc:
            failures[name] = f"{type(exc).__name__}: {exc}"
    if failures:
        return JsonResponse({"status": "unavailable", "failures": failures}, status=503)
    return JsonResponse({"status": "ready"})
