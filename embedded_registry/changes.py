"""Which services' instances changed, for the Nacos 2.x subscribers (nacos_grpc/), whatever
made the change: either protocol, the sync draining an instance, expiry, any process.

A change is told, once committed, to the listeners of this process at once and, with
REDIS_URL set, published on Redis (the same pub/sub as the gateways' wake-ups,
gateways/protocol/wakeup.py), where every other process's relay (`relay_from_redis`) tells
its own listeners. Without Redis one process does everything (the Celery worker runs inside
the web process), so the listeners of this process are all there are."""

import json
import logging
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import redis
from django.conf import settings
from django.db import transaction

from embedded_registry.models import EmbeddedInstance
from events.after_commit import after_commit

log = logging.getLogger(__name__)

# Tells this process's own publications apart, which its listeners had already.
ORIGIN = uuid.uuid4().hex
RECONNECT_MAX_SECONDS = 10.0


@dataclass(frozen=True)
class ServiceKey:
    namespace: str
    group: str
    service: str


Listener = Callable[[ServiceKey | None], None]
"""Called with the service that changed, or None when changes may have been missed (Redis
was unreachable): then every subscriber should be told its service anew."""

_listeners: list[Listener] = []


def channel() -> str:
    return settings.REDIS_PREFIX + ":nacos:naming"


def listen(listener: Listener) -> None:
    _listeners.append(listener)


def unlisten(listener: Listener) -> None:
    if listener in _listeners:
        _listeners.remove(listener)


def _tell(key: ServiceKey | None) -> None:
    for listener in list(_listeners):
        try:
            listener(key)
        except Exception:
            log.exception("A listener of registry changes failed on %s.", key)


_redis_client: redis.Redis | None = None


def _redis() -> redis.Redis:
    global _redis_client
    if _redis_client is None:
        _redis_client = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=5)
    return _redis_client


def changed(namespace: str, group: str, service: str) -> None:
    """Announce, once the current transaction commits, that this service's instances
    changed."""
    key = ServiceKey(namespace, group, service)
    transaction.on_commit(lambda: _tell(key))
    if settings.REDIS_URL:
        message = json.dumps({"origin": ORIGIN, **key.__dict__})
        after_commit(
            lambda: _redis().publish(channel(), message), f"announcing a change of {service}"
        )


def on_instance_saved_or_deleted(sender: Any, instance: EmbeddedInstance, **kwargs: Any) -> None:
    changed(instance.namespace, instance.group, instance.service)


def relay_from_redis(stop: threading.Event) -> None:
    """Tell this process's listeners what other processes announce, until `stop` is set;
    reconnects, and after a reconnect tells them that changes may have been missed."""
    delay = 0.5
    while not stop.is_set():
        pubsub = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=5).pubsub()
        try:
            pubsub.subscribe(channel())
            delay = 0.5
            while not stop.is_set():
                message = pubsub.get_message(ignore_subscribe_messages=True, timeout=1.0)
                if message is None or message["type"] != "message":
                    continue
                news = json.loads(message["data"])
                if news.get("origin") != ORIGIN:
                    _tell(ServiceKey(news["namespace"], news["group"], news["service"]))
        except (redis.RedisError, OSError, ValueError, KeyError) as exc:
            log.warning("The registry's change relay lost Redis (%s); reconnecting.", exc)
        finally:
            pubsub.close()
        if stop.is_set():
            return
        _tell(None)
        time.sleep(delay)
        delay = min(delay * 2, RECONNECT_MAX_SECONDS)
