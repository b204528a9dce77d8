"""The default mode's background jobs (graylane/background.py: a Celery worker inside the web
process, on the in-memory broker of graylane/memory_broker.py): a task queued in the process
starts promptly, and the worker's threads keep their database connections between tasks.

In a child process without REDIS_URL, so it runs whatever broker the suite is on (CI:
Redis)."""

import json
import subprocess
import sys
import textwrap

import pytest

from testing.processes import BASE_DIR, django_env

pytestmark = pytest.mark.slow

CHILD = textwrap.dedent(
    """
    import json, os, time

    import django

    django.setup()
    from graylane.background import start_in_process_jobs
    from graylane.celery import app

    started = {}

    @app.task(name="tests.in_process_probe")
    def probe(n):
        started[n] = time.monotonic()

    assert start_in_process_jobs()

    def run(n, timeout):
        queued = time.monotonic()
        probe.delay(n)
        while n not in started and time.monotonic() < queued + timeout:
            time.sleep(0.001)
        return started.get(n, queued + timeout) - queued

    run(0, 20)  # the worker has started
    waits = []
    for n in range(1, 8):
        time.sleep(0.13)  # out of step with any polling
        waits.append(run(n, 5))
    transport = app.connection_for_write().transport.driver_type
    print(json.dumps({"transport": transport, "waits": waits}), flush=True)
    os._exit(0)  # the worker and beat threads do not stop by themselves
    """
)


CONNECTIONS_CHILD = textwrap.dedent(
    """
    import json, os, time

    import django

    django.setup()
    from celery.signals import task_postrun
    from django.db import connection
    from graylane.background import start_in_process_jobs
    from graylane.celery import app

    ran, open_after = set(), {}

    @app.task(name="tests.connection_probe")
    def probe(n, fail):
        ran.add(n)
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        if fail:
            raise RuntimeError("this probe fails")

    assert start_in_process_jobs()

    def run(n, fail=False, done=open_after):
        probe.delay(n, fail)
        deadline = time.monotonic() + 20
        while n not in done and time.monotonic() < deadline:
            time.sleep(0.001)

    run(0, done=ran)  # the worker has started, Celery's Django fixup with it
    # After every other receiver of the signal (graylane.celery's, the fixup's).
    task_postrun.connect(
        lambda task=None, args=(), **kwargs: open_after.__setitem__(
            args[0], connection.connection is not None
        )
        if task.name == "tests.connection_probe"
        else None,
        weak=False,
    )
    outcome = {"succeeded": [], "failed": []}
    for n in range(1, 13):
        run(n, fail=n % 4 == 0)
        outcome["failed" if n % 4 == 0 else "succeeded"].append(open_after.get(n))
    print(json.dumps(outcome), flush=True)
    os._exit(0)
    """
)


def run_child(tmp_path, code: str) -> dict:
    """The last line `code` prints, as JSON, run in-process jobs on an empty SQLite file."""
    env = django_env(
        f"sqlite:///{tmp_path / 'jobs.sqlite3'}",
        REDIS_URL="",
        IN_PROCESS_JOBS="true",
        GRAYLANE_VAR_DIR=str(tmp_path),
        LOG_LEVEL="CRITICAL",  # beat's own tasks fail on this empty database: not the point
    )
    child = subprocess.run(
        [sys.executable, "-c", code],
        cwd=BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert child.returncode == 0, child.stderr[-3000:]
    return json.loads(child.stdout.strip().splitlines()[-1])


def test_a_task_queued_in_the_process_starts_promptly(tmp_path):
    outcome = run_child(tmp_path, CHILD)
    assert outcome["transport"] == "graylane-memory"
    waits = sorted(outcome["waits"])
    # kombu's default polling (every second) would make the median wait ~0.5 s.
    assert waits[len(waits) // 2] < 0.1, f"queued -> started: {waits}"
    assert waits[-1] < 1.0, f"queued -> started: {waits}"


def test_worker_threads_keep_their_connection_unless_a_task_failed(tmp_path):
    # Celery's Django fixup would close it after every task: a new connection per delivery.
    outcome = run_child(tmp_path, CONNECTIONS_CHILD)
    assert outcome["succeeded"] == [True] * 9, "kept after a task that succeeded"
    assert outcome["failed"] == [False] * 3, "closed after a task that failed"
