"""Outages answer honestly: a real server (uvicorn, as `make run`) on a PostgreSQL and a Redis
of the test's own takes a stream of writes of every kind while one of the two is stopped and
started again. Every write either commits and answers 2xx, or answers 503 (with
Retry-After) and commits nothing; none answers 500. What was committed is read from the
database afterwards, write by write."""

import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import pytest

from gateways.tests.conftest import wait_until
from tests import outage_lab
from tests.processes import (
    BASE_DIR,
    POSTGRES_BIN,
    AsgiServer,
    PostgresServer,
    RedisServer,
    django_env,
)

pytestmark = pytest.mark.skipif(
    not (POSTGRES_BIN / "initdb").exists() or not shutil.which("redis-server"),
    reason="needs PostgreSQL 15's initdb and redis-server (apt: postgresql-15, redis-server)",
)

HEALTHY_WRITES = 60  # before the outage
OUTAGE_SECONDS = 3.0
AFTER_SECONDS = 3.0  # writes after the restart, to see the server recover


@pytest.fixture(scope="module")
def postgres():
    directory = Path(tempfile.mkdtemp(prefix="graylane-outage-pg-"))
    server = PostgresServer(directory)
    try:
        with server:
            yield server
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def _migrated(postgres: PostgresServer, name: str, redis: RedisServer) -> dict[str, str]:
    env = django_env(postgres.create_database(name), REDIS_URL=redis.url, REDIS_PREFIX=name)
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput"],
        cwd=BASE_DIR,
        env=env,
        check=True,
        capture_output=True,
    )
    return env


def _writes_through_an_outage(env: dict[str, str], stop, start) -> tuple[list, dict]:
    """The stream of writes against a server on `env`; `stop()` and `start()` the service
    whose outage it is, mid-stream. Answers the writes and the times the outage began and
    ended."""
    lab = outage_lab.run(env, "prepare")
    with AsgiServer(env) as server:
        # A gateway reports the services of the document it was given: it polls once.
        poll = httpx.get(
            server.url + "/api/v1/gateway-config/",
            headers={"Authorization": f"Token {lab['tokens']['gateway']}"},
            timeout=10,
        )
        assert poll.status_code == 200, poll.text
        stream = outage_lab.Stream(server.url, lab["tokens"], lab).start()
        try:
            wait_until(lambda: stream.made() >= HEALTHY_WRITES, timeout=30, what="writes")
            began = time.monotonic()
            stop()
            time.sleep(OUTAGE_SECONDS)
            start()
            ended = time.monotonic()
            time.sleep(AFTER_SECONDS)
        finally:
            writes = stream.finish()
        server_log = server.log(20_000)
    committed = outage_lab.run(env, "count", [{"kind": w.kind, "key": w.key} for w in writes])
    return writes, {"began": began, "ended": ended, "committed": committed, "log": server_log}


def _report(title: str, writes, committed) -> None:
    """The counts the closing note quotes, per kind and for all writes (polls are reads:
    listed, not counted in "all"). "committed": writes found in the database afterwards."""
    pairs = list(zip(writes, committed, strict=True))
    kinds = sorted({w.kind for w in writes})
    print(f"\n{title}")
    print(
        f"{'kind':<10} {'tried':>6} {'2xx':>5} {'503':>5} {'500':>5} {'other':>5} {'committed':>9}"
    )
    for kind in [*kinds, "all"]:
        rows = [(w, n) for w, n in pairs if w.kind == kind or (kind == "all" and w.kind != "poll")]
        ok = sum(1 for w, _ in rows if w.status and 200 <= w.status < 300)
        unavailable = sum(1 for w, _ in rows if w.status == 503)
        errors = sum(1 for w, _ in rows if w.status == 500)
        other = len(rows) - ok - unavailable - errors
        found = sum(1 for _, n in rows if n)
        print(
            f"{kind:<10} {len(rows):>6} {ok:>5} {unavailable:>5} {errors:>5} {other:>5} {found:>9}"
        )
    no_ops = sum(1 for w in writes if w.kind == "rollback" and w.status == 200)
    print(
        f"(2xx that changed nothing, so committed nothing: {no_ops} rollbacks to the live content)"
    )


def _check(writes, outage: dict) -> None:
    committed = outage["committed"]
    _report(outage["title"], writes, committed)
    server_errors = [(w.kind, w.key, w.status, w.answer) for w in writes if w.status == 500]
    assert server_errors == [], outage["log"][-6000:]
    unexpected = [
        (w.kind, w.key, w.status, w.answer)
        for w in writes
        if w.status != 503 and not (w.status and 200 <= w.status < 300)
    ]
    assert unexpected == []
    unclear = [
        (w.kind, w.retry_after, w.answer)
        for w in writes
        if w.status == 503
        and not (w.retry_after and isinstance(w.answer, dict) and w.answer.get("detail"))
    ]
    assert unclear == [], "a 503 says why, and when to try again"
    wrong = [
        (w.kind, w.key, w.status, w.answer, n)
        for w, n in zip(writes, committed, strict=True)
        if w.expected() is not None and n != w.expected()
    ]
    assert wrong == [], "committed (count) does not match the answer (status)"
    recovered = {w.kind for w in writes if w.sent_at > outage["ended"] + 1.5 and w.expected()}
    assert recovered >= {"policy", "metrics", "lifecycle", "gateway"}, recovered


def test_redis_stopped_during_writes(postgres):
    with RedisServer() as redis:
        env = _migrated(postgres, "redis_outage", redis)
        writes, outage = _writes_through_an_outage(env, redis.stop, redis.start)
    outage["title"] = f"Redis stopped for {OUTAGE_SECONDS:g} s during writes"
    _check(writes, outage)
    during = [w for w in writes if outage["began"] < w.sent_at < outage["ended"]]
    # The live windows are in Redis: without them a metrics post is refused, not guessed.
    assert any(w.kind == "metrics" and w.status == 503 for w in during)


def test_postgres_stopped_during_writes(postgres):
    with RedisServer() as redis:
        env = _migrated(postgres, "postgres_outage", redis)
        writes, outage = _writes_through_an_outage(env, postgres.stop, postgres.start)
    outage["title"] = f"PostgreSQL stopped for {OUTAGE_SECONDS:g} s during writes"
    _check(writes, outage)
    during = [w for w in writes if outage["began"] < w.sent_at < outage["ended"]]
    # Felt: a write then was refused, or waited for the database (the pool waits for it).
    assert any(w.status == 503 or w.answered_at - w.sent_at > 1 for w in during)
