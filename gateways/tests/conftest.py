import pytest
from django.db import connection

from gateways.models import Gateway
from testing.processes import AsgiServer, database_url, django_env


@pytest.fixture
def make_gateway(db):
    """`make_gateway("gw-1", "push", "http://...")` -> (gateway, token, push secret)."""

    def make(name: str = "gw-1", mode: str = Gateway.PULL, endpoint: str = "", **fields):
        return Gateway.objects.create_with_credentials(
            name=name, mode=mode, endpoint=endpoint, **fields
        )

    return make


@pytest.fixture(scope="module")
def celery_worker(django_db_setup, django_db_blocker):
    """A Celery worker in this process, on the configured broker (Redis, or memory://), for
    a whole test module: stopping one takes seconds. Its tasks use the test database."""
    from celery.contrib.testing.worker import start_worker

    from graylane.celery import app

    # Tasks queued by earlier tests that had no worker (their database is gone) would
    # deliver to this module's gateways.
    app.control.purge()
    with (
        django_db_blocker.unblock(),
        start_worker(
            app, pool="threads", concurrency=4, perform_ping_check=False, shutdown_timeout=20
        ) as worker,
    ):
        yield worker


@pytest.fixture(scope="module")
def server(django_db_setup, django_db_blocker):
    """uvicorn serving graylane.asgi on the test database, for a whole test module."""
    with AsgiServer(django_env(database_url(connection.settings_dict))) as server:
        yield server


def asgi_scope(path: str, token: str, query: bytes = b"", method: str = "GET") -> dict:
    """An HTTP scope as uvicorn builds it, for a gateway calling with `token`."""
    return {
        "type": "http",
        "method": method,
        "path": path,
        "query_string": query,
        "headers": [(b"host", b"127.0.0.1"), (b"authorization", f"Token {token}".encode())],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
    }
