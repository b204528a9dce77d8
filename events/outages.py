"""Which errors mean that the database or Redis is unavailable for now, and what became of
a COMMIT that got no answer.

A request that meets one before it committed anything is answered 503 with Retry-After
(graylane/outages.py) rather than 500: nothing was saved, and the same request can be sent
again. Work that follows a commit and meets one is retried (events/after_commit.py).
"""

import time

from django.db import DatabaseError, InterfaceError, OperationalError, connections
from django.db.backends.base.base import BaseDatabaseWrapper
from kombu.exceptions import OperationalError as BrokerUnavailable
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeout

# What a client is told to wait before it tries again (the Retry-After header). Restarting
# Redis or PostgreSQL, or failing over to a standby, takes seconds.
RETRY_AFTER_SECONDS = 5
# How long a COMMIT that got no answer waits for PostgreSQL to say what became of it.
COMMIT_OUTCOME_WAIT_SECONDS = 15.0


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


# A COMMIT whose answer is lost (the server went away at that instant) may have committed:
# the client cannot tell from the error. PostgreSQL can tell later, by the transaction's id.


def transaction_id(connection: BaseDatabaseWrapper) -> int | None:
    """The id of the transaction open on `connection` (PostgreSQL; None elsewhere: SQLite
    commits in the process, so a COMMIT that fails there did not commit)."""
    if connection.vendor != "postgresql":
        return None
    with connection.cursor() as cursor:
        cursor.execute("SELECT txid_current()")
        return cursor.fetchone()[0]


def commit_failed_on(exc: BaseException) -> str | None:
    """The alias of the connection whose COMMIT raised `exc`, if that is where it came from."""
    tb = exc.__traceback__
    while tb is not None:
        owner = tb.tb_frame.f_locals.get("self")
        if tb.tb_frame.f_code.co_name == "_commit" and isinstance(owner, BaseDatabaseWrapper):
            return owner.alias
        tb = tb.tb_next
    return None


def committed_after_all(alias: str, xid: int) -> bool | None:
    """Whether transaction `xid`, whose COMMIT got no answer, committed, asked of the
    database as soon as it answers again; None if it does not within
    COMMIT_OUTCOME_WAIT_SECONDS."""
    connection = connections[alias]
    deadline = time.monotonic() + COMMIT_OUTCOME_WAIT_SECONDS
    while True:
        try:
            connection.close()
            with connection.cursor() as cursor:
                cursor.execute("SELECT txid_status(%s)", [xid])
                return cursor.fetchone()[0] == "committed"
        except DatabaseError:
            if time.monotonic() > deadline:
                return None
            time.sleep(0.5)
