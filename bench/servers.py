"""What the benches that load a real server share: a migrated template SQLite database with a
viewer's API token, uvicorn serving a copy of it through a bench's own app factory, `wrk` to
load it, and reading one HTTP/1.1 message off an asyncio stream (for loopback peers).

Uses the test support's process helpers (testing/processes.py); importing this never sets up Django.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from bench.measure import BENCH_SECRET_KEYS, create_bench_database, drop_bench_database
from testing.processes import BASE_DIR, AsgiServer, django_env

WRK_MISSING = "no wrk: it comes from Debian (apt-get install -y wrk)"

# -- the server --------------------------------------------------------------------------------


def sqlite_env(var_dir: Path, **extra: str) -> dict[str, str]:
    """Environment for a graylane process on var_dir/graylane.sqlite3: no Redis, no jobs."""
    database = f"sqlite:///{var_dir / 'graylane.sqlite3'}"
    return django_env(database, GRAYLANE_VAR_DIR=str(var_dir), REDIS_URL="", **extra)


@contextlib.contextmanager
def template_database() -> Iterator[tuple[Path, str]]:
    """(directory, token): a directory holding a migrated SQLite database and the API token of
    a viewer made in it. Removed on leaving, whatever happens."""
    var = Path(tempfile.mkdtemp(prefix="graylane-bench-"))
    try:
        env = sqlite_env(var)
        manage = [sys.executable, "manage.py"]
        subprocess.run([*manage, "migrate", "-v0"], cwd=BASE_DIR, env=env, check=True)
        issued = subprocess.run(
            [*manage, "issue_token", "bench", "--role", "viewer"],
            cwd=BASE_DIR,
            env=env,
            check=True,
            capture_output=True,
            text=True,
        )
        yield var, issued.stdout.strip().splitlines()[-1]
    finally:
        shutil.rmtree(var, ignore_errors=True)


class BenchServer(AsgiServer):
    """uvicorn serving what `factory` ("module:function", uvicorn --factory) returns, on
    var_dir's SQLite database; like the tests' AsgiServer, in a session of its own (its CPU:
    measure.session_cpu_seconds(server.pid)), ready once /healthz answers."""

    def __init__(self, factory: str, var_dir: Path, **extra: str):
        super().__init__(sqlite_env(var_dir, **extra))
        self.var_dir = var_dir
        self.args[-1:] = ["--factory", factory]


@contextlib.contextmanager
def serve(factory: str, template: Path, **extra: str) -> Iterator[BenchServer]:
    """A started BenchServer on a fresh copy of the template's database (`extra`: more
    environment); stopped, and its directory removed, on leaving."""
    var = Path(tempfile.mkdtemp(prefix="graylane-bench-"))
    try:
        shutil.copy(template / "graylane.sqlite3", var / "graylane.sqlite3")
        with BenchServer(factory, var, **extra) as server:
            yield server
    finally:
        shutil.rmtree(var, ignore_errors=True)


# -- a bench's own database, directory and Redis prefix, in this process ----------------------


@dataclass
class BenchRun:
    database: str  # its DATABASE_URL
    var_dir: str
    processes: list  # started children to stop on leaving (each with .stop())


def delete_redis_keys(url: str, prefix: str) -> None:
    """Every key under this run's prefix (celery's queues and bindings, the channel layer)."""
    import redis

    client = redis.Redis.from_url(url)
    try:
        keys = list(client.scan_iter(match=f"{prefix}*", count=1000))
        for start in range(0, len(keys), 500):
            client.delete(*keys[start : start + 500])
    finally:
        client.close()


def setup_django(database: str, var_dir: str, prefix: str, redis_url: str | None) -> None:
    """Point this process (and, through the environment, its children) at the bench's own
    database, directory and Redis prefix; migrate."""
    os.environ.update(
        DJANGO_SETTINGS_MODULE="graylane.settings",
        DATABASE_URL=database,
        GRAYLANE_VAR_DIR=var_dir,
        SECRET_KEY="bench-only-secret-key-long-enough-for-django-checks-0123",
        GRAYLANE_SECRET_KEYS=BENCH_SECRET_KEYS,
        LOG_LEVEL="WARNING",
        REDIS_PREFIX=prefix,
    )
    os.environ.pop("REDIS_URL", None)
    if redis_url:
        os.environ["REDIS_URL"] = redis_url
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def close_django_connections() -> None:
    from django.db import connections

    connections.close_all()


def stop_processes(processes: list) -> None:
    for process in reversed(processes):
        with contextlib.suppress(Exception):
            process.stop()


@contextlib.contextmanager
def bench_run(kind: str, database_url: str | None, redis_url: str | None) -> Iterator[BenchRun]:
    """A bench's own temporary directory, database (`database_url`, a PostgreSQL database
    made anew whose name must say it is a bench one, or SQLite in the directory), Redis keys
    under a prefix of this run's, and this process's Django set up on them; on leaving,
    whatever happens, the child processes put in `processes` are stopped and all of it is
    removed again, in reverse order."""
    with contextlib.ExitStack() as cleanup:
        var_dir = tempfile.mkdtemp(prefix=f"graylane-bench-{kind}-")
        cleanup.callback(shutil.rmtree, var_dir, ignore_errors=True)
        prefix = f"graylane-bench-{uuid.uuid4().hex}"
        if redis_url:
            cleanup.callback(delete_redis_keys, redis_url, prefix)
        if database_url:
            database = database_url
            cleanup.callback(drop_bench_database, database)
            create_bench_database(database)
        else:
            database = f"sqlite:///{var_dir}/bench.sqlite3"
        setup_django(database, var_dir, prefix, redis_url)
        cleanup.callback(close_django_connections)
        run = BenchRun(database, var_dir, [])
        cleanup.callback(stop_processes, run.processes)
        yield run


# -- the load ----------------------------------------------------------------------------------


def wrk(url: str, seconds: int, header: str | None = None) -> int:
    """How many requests `wrk -t1 -c8` completed in `seconds` (one thread, 8 connections);
    RuntimeError if any was answered other than 2xx/3xx."""
    args = ["wrk", "-t1", "-c8", f"-d{seconds}s"] + (["-H", header] if header else [])
    out = subprocess.run([*args, url], capture_output=True, text=True, check=True).stdout
    if "Non-2xx" in out:
        raise RuntimeError(f"{url} answered errors:\n{out}")
    return int(next(line for line in out.splitlines() if "requests in" in line).split()[0])


# -- loopback peers ----------------------------------------------------------------------------


async def read_message(reader) -> tuple[str, dict[str, str], bytes]:
    """One HTTP/1.1 message with a Content-Length: (first line, headers with lower-case
    names, body)."""
    head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
    headers = {}
    for line in head[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    body = await reader.readexactly(int(headers.get("content-length") or 0))
    return head[0], headers, body
