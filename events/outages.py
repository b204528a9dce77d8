"""Which errors mean that the database or Redis is unavailable for now.

A request that meets one before it committed anything is answered 503 with Retry-After
(graylane/outages.py) rather than 500: nothing was saved, and the same request can be sent
again. Work that follows a commit and meets one is retried (events/after_commit.py).
"""

from django.db import InterfaceError, OperationalError
from kombu.exceptions import OperationalError as BrokerUnavailable
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeout

# What a client is told to wait before it tries again (the Retry-After header). Restarting
# Redis or PostgreSQL, or failing over to a standby, takes seconds.
RETRY_AFTER_SECONDS = 5


def unavailable(exc: BaseException) -> str | None:
    """What is unavailable when `exc` says so ("the database", "Redis"), else None.

    The database's OperationalError is its "not now" family: a connection refused, lost or
    not to be had from the pool in time, a server shutting down, a serialization failure or
    a deadlock (PostgreSQL), a database locked for too long (SQLite). InterfaceError: a
    connection already closed. Redis: no connection, or no answer in time, for the live
    windows and the channel layer (redis-py) and for Celery's broker (kombu)."""
    if isinstance(exc, OperationalError | InterfaceError):
        return "the database"
    if isinstance(exc, RedisConnectionError | RedisTimeout | BrokerUnavailable):
        return "Redis"
    return None


def unavailable_detail(cause: str, *, writes: bool) -> str:
    """The `detail` of a 503 for `cause`; `writes`: the request may have meant to change
    something, and did not."""
    saved = ": nothing was saved" if writes else ""
    return f"{cause[0].upper()}{cause[1:]} is unavailable{saved}. Try again later."
