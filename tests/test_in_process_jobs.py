"""The default mode's background jobs (graylane/background.py: a Celery worker inside the web
process, on the in-memory broker of graylane/memory_broker.py): a task queued in the process
starts promptly.

In a child process without REDIS_URL, so it runs whatever broker the suite is on (CI:
Redis)."""

import json
import subprocess
import sys
import textwrap

from tests.processes import BASE_DIR, django_env

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


def test_a_task_queued_in_the_process_starts_promptly(tmp_path):
    env = django_env(
        f"sqlite:///{tmp_path / 'jobs.sqlite3'}",
        REDIS_URL="",
        IN_PROCESS_JOBS="true",
        GRAYLANE_VAR_DIR=str(tmp_path),
        LOG_LEVEL="CRITICAL",  # beat's own tasks fail on this empty database: not the point
    )
    child = subprocess.run(
        [sys.executable, "-c", CHILD],
        cwd=BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert child.returncode == 0, child.stderr[-3000:]
    outcome = json.loads(child.stdout.strip().splitlines()[-1])
    assert outcome["transport"] == "graylane-memory"
    waits = sorted(outcome["waits"])
    # kombu's default polling (every second) would make the median wait ~0.5 s.
    assert waits[len(waits) // 2] < 0.1, f"queued -> started: {waits}"
    assert waits[-1] < 1.0, f"queued -> started: {waits}"
