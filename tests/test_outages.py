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

from testing import outage_lab
from testing.processes import (
    BASE_DIR,
    POSTGRES_BIN,
    AsgiServer,
    CommitAnswerDropper,
    PostgresServer,
    RedisServer,
    django_env,
)
from testing.waiting import wait_until

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not (POSTGRES_BIN / "initdb").exists() or not shutil.which("redis-server"),
        reason="needs PostgreSQL 15's initdb and redis-server (apt: postgresql-15, redis-server)",
    ),
]

HEALTHY_WRITES = 60  # before the outage
OUTAGE_SECONDS = 3.0
AFTER_SECONDS = 3.0  # writes after the restart, to see the server recover
# ... and, on a loaded machine, up to this long for every kind of write to succeed again.
RECOVERY_TIMEOUT = 60.0
RECOVERED = {"policy", "metrics", "lifecycle", "gateway"}


@pytest.fixture(scope="module")
def postgres():
    directory = Path(tempfile.mkdtemp(prefix="graylane-outage-pg-"))
    server = PostgresServer(directory)
    try:
        with server:
            yield server
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def _migrated(postgres: PostgresServer, name: str, redis: RedisServer, url="") -> dict[str, str]:
    """The environment of a server on a new database `name` (at `url` when given: through a
    proxy), migrated."""
    database = postgres.create_database(name)
    env = django_env(url or database, REDIS_URL=redis.url, REDIS_PREFIX=name)
    migrated = subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput"],
        cwd=BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
    )
    assert migrated.returncode == 0, migrated.stderr[-3000:]
    return env


def _through_an_outage(postgres: PostgresServer, of: str) -> list:
    """A stream of writes through a server on a database of `postgres` and a Redis of its
    own, while `of` ("Redis" or "PostgreSQL") is stopped and started again; every answer
    checked. Answers the writes sent while it was down."""
    with RedisServer() as redis:
        env = _migrated(postgres, f"{of.lower()}_outage", redis)
        stopped = redis if of == "Redis" else postgres
        writes, outage = _writes(env, stopped.stop, stopped.start)
    _check(f"{of} stopped for {OUTAGE_SECONDS:g} s during writes", writes, outage)
    return [w for w in writes if outage["began"] < w.sent_at < outage["ended"]]


def _writes(env: dict[str, str], stop, start) -> tuple[list, dict]:
    """The stream of writes against a server on `env`, `stop()` and `start()` mid-stream:
    the writes, what each committed, the times the outage began and ended."""
    lab = outage_lab.run(env, "prepare")
    with AsgiServer(env) as server:
        # A gateway reports the services of the document it runs: it polls and acks once.
        headers = {"Authorization": f"Token {lab['tokens']['gateway']}"}
        poll = httpx.get(server.url + "/api/v1/gateway-config/", headers=headers, timeout=10)
        number = poll.json()["generation"]
        ack_path = f"/api/v1/gateways/{outage_lab.GATEWAY}/ack/"
        ack = httpx.post(server.url + ack_path, json={"generation": number}, headers=headers)
        assert ack.status_code == 200, ack.text
        stream = outage_lab.Stream(server.url, lab["tokens"], lab).start()
        try:
            wait_until(lambda: stream.made() >= HEALTHY_WRITES, timeout=30, what="writes")
            began = time.monotonic()
            stop()
            time.sleep(OUTAGE_SECONDS)
            start()
            ended = time.monotonic()
            time.sleep(AFTER_SECONDS)
            while (
                not _recovered(list(stream.writes), ended) >= RECOVERED
                and time.monotonic() - ended < RECOVERY_TIMEOUT
            ):
                time.sleep(0.2)
        finally:
            writes = stream.finish()
        server_log = server.log(20_000)
    committed = outage_lab.run(env, "count", [{"kind": w.kind, "key": w.key} for w in writes])
    return writes, {"began": began, "ended": ended, "committed": committed, "log": server_log}


def _recovered(writes, ended: float) -> set[str]:
    """The kinds of write that succeeded, sent well after the outage ended."""
    return {w.kind for w in writes if w.sent_at > ended + 1.5 and w.expected()}


def _by_key(writes, committed) -> dict[tuple, tuple[list, int]]:
    """The writes of each (kind, key) and what the database holds of that key. Most keys
    are one write's own; a release's abort is sent again after a 503, and acks of one
    generation repeat."""
    groups: dict[tuple, tuple[list, int]] = {}
    for write, found in zip(writes, committed, strict=True):
        groups.setdefault((write.kind, write.key), ([], found))[0].append(write)
    return groups


def _as_answered(kind: str, group: list, found: int) -> bool:
    """Whether the database holds what the answers say: once per 2xx, never for a 503.
    An ack moves the gateway forward only, so a later one covers a refused one."""
    expected = sum(write.expected() for write in group)
    if kind == "ack":
        return found == 1 or expected == 0
    return found == expected


def _report(title: str, writes, committed) -> None:
    """The counts the closing note quotes, per kind and for all writes (polls are reads:
    listed, not counted in "all"). "committed": the writes found in the database."""
    groups = _by_key(writes, committed)
    print(f"\n{title}")
    print(
        f"{'kind':<10} {'tried':>6} {'2xx':>5} {'503':>5} {'500':>5} {'other':>5} {'committed':>9}"
    )
    for kind in [*sorted({w.kind for w in writes}), "all"]:
        rows = [w for w in writes if w.kind == kind or (kind == "all" and w.kind != "poll")]
        ok = sum(1 for w in rows if w.status and 200 <= w.status < 300)
        unavailable = sum(1 for w in rows if w.status == 503)
        errors = sum(1 for w in rows if w.status == 500)
        other = len(rows) - ok - unavailable - errors
        found = sum(
            n for (k, _), (_, n) in groups.items() if k == kind or (kind == "all" and k != "poll")
        )
        print(
            f"{kind:<10} {len(rows):>6} {ok:>5} {unavailable:>5} {errors:>5} {other:>5} {found:>9}"
        )
    no_ops = sum(1 for w in writes if w.kind == "rollback" and w.status == 200 and not w.expected())
    late = sum(1 for w in writes if "Saved, but" in str(w.answer))
    print(f"(2xx that changed nothing: {no_ops} rollbacks to the live content; saved, but the "
          f"answer met the outage: {late}; acks count once per generation)")  # fmt: skip


def _check(title: str, writes, outage: dict) -> None:
    committed = outage["committed"]
    _report(title, writes, committed)
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
        (kind, key, [(w.status, w.answer) for w in group], found)
        for (kind, key), (group, found) in _by_key(writes, committed).items()
        if not _as_answered(kind, group, found)
    ]
    assert wrong == [], "what the database holds does not match the answers"
    recovered = _recovered(writes, outage["ended"])
    assert recovered >= RECOVERED, recovered


def test_redis_stopped_during_writes(postgres):
    during = _through_an_outage(postgres, "Redis")
    # The live windows are in Redis: without them a metrics post is refused, not guessed.
    assert any(w.kind == "metrics" and w.status == 503 for w in during)


def test_postgres_stopped_during_writes(postgres):
    during = _through_an_outage(postgres, "PostgreSQL")
    # Felt: a write then was refused, or waited for the database (the pool waits for it).
    assert any(w.status == 503 or w.answered_at - w.sent_at > 1 for w in during)


def test_a_write_whose_commit_answer_is_lost_is_not_answered_503(postgres):
    """A COMMIT that PostgreSQL carried out, whose answer never came back (a proxy cuts the
    connection there, as a database going away at that instant does): the server asks
    PostgreSQL what became of the transaction, and answers that it was saved."""
    dropper = CommitAnswerDropper(postgres.port)
    try:
        with RedisServer() as redis:
            env = _migrated(postgres, "lost_commit", redis, url=dropper.url("lost_commit"))
            lab = outage_lab.run(env, "prepare")
            with AsgiServer(env) as server:
                dropper.arm()
                response = httpx.patch(
                    server.url + "/api/v1/policy/",
                    json={"header": {"value": "lost-answer"}, "comment": "lost-answer"},
                    headers={"Authorization": f"Token {lab['tokens']['admin']}"},
                    timeout=30,
                )
            assert dropper.dropped.is_set(), "the COMMIT's answer was cut off"
            committed = outage_lab.run(env, "count", [{"kind": "policy", "key": "lost-answer"}])
    finally:
        dropper.close()
    assert (response.status_code, committed) == (200, [1]), response.text
    assert response.json()["detail"].startswith("Saved")
