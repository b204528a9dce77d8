"""The gray route through Celery with a real Redis broker and real `celery worker` processes:
a request's flag (and lane, and versions) reaches the task, a GRAY request's task runs on the
gray worker (queue `<queue>.V2`), a PROD one on the prod worker, a lane's on the worker of the
version it asks for at the consuming service (`<queue>.V3`), and with no such worker the task
falls back to prod (or, without fallback, waits for one)."""

import os
import sys
import time
import uuid

import httpx
import pytest

from testing.processes import Process, free_port

REDIS_URL = os.environ.get("REDIS_URL", "")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not REDIS_URL,
        reason="needs a Redis broker: set REDIS_URL (CI sets redis://127.0.0.1:6379/3)",
    ),
]


class Worker(Process):
    def __init__(self, name: str, queue: str, env: dict):
        args = [sys.executable, "-m", "celery", "-A", "dataplane.sdk.tests.celery_app", "worker"]
        args += ["-Q", queue, "-n", f"{name}-{uuid.uuid4().hex[:6]}@%h", "--pool=threads"]
        args += ["--concurrency=2", "--without-mingle", "--without-gossip", "--loglevel=INFO"]
        super().__init__(args, {**env, "WORKER_NAME": name})

    def is_ready(self) -> bool:
        return " ready." in self.log()


class Publisher(Process):
    def __init__(self, env: dict):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/task"
        args = [sys.executable, "-m", "uvicorn", "--port", str(self.port), "--lifespan", "off"]
        super().__init__([*args, "dataplane.sdk.tests.celery_app:service"], env)

    def is_ready(self) -> bool:
        try:
            return httpx.get(self.url.replace("/task", "/"), timeout=1).status_code == 200
        except httpx.HTTPError:
            return False


def environment(fallback: bool = True) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "DJANGO_"))}
    queue = f"sdk-tests-{uuid.uuid4().hex[:8]}"
    return {**env, "SDK_TEST_QUEUE": queue, "SDK_TEST_FALLBACK": str(fallback).lower()}


def task_of(publisher: Publisher, flag: str | None, **route: str) -> dict:
    """What the task published by a request with this route saw; `route`: more headers."""
    headers = {"X-Gray-Status": flag} if flag else {}
    return httpx.get(publisher.url, headers={**headers, **route}, timeout=15).json()


def until_gray_worker_seen(gray_task, seconds: float = 15.0, worker: str = "gray") -> dict:
    """The first gray tasks may go to prod until the publisher's probe has seen the gray
    worker (fallback); it is cached after that. Waits by the clock: on a fast machine many
    tasks run before the probe's first answer is in."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        answer = gray_task()
        if answer["worker"] == worker:
            return answer
        time.sleep(0.1)
    raise AssertionError(f"gray tasks never reached the {worker} worker")


def test_gray_tasks_run_on_the_gray_worker_prod_tasks_on_the_prod_worker():
    env = environment()
    queue = env["SDK_TEST_QUEUE"]
    with (
        Worker("prod", queue, env),
        Worker("gray", f"{queue}.V2", env),
        Publisher(env) as publisher,
    ):
        assert until_gray_worker_seen(lambda: task_of(publisher, "GRAY")) == {
            "flag": "GRAY",
            "worker": "gray",
        }
        for _ in range(3):
            assert task_of(publisher, "GRAY") == {"flag": "GRAY", "worker": "gray"}
            assert task_of(publisher, "PROD") == {"flag": "PROD", "worker": "prod"}
            assert task_of(publisher, None) == {"flag": None, "worker": "prod"}
        assert task_of(publisher, "ALL") == {"flag": "ALL", "worker": "prod"}


def test_with_no_gray_worker_gray_tasks_fall_back_to_prod_with_their_flag():
    env = environment()
    with Worker("prod", env["SDK_TEST_QUEUE"], env), Publisher(env) as publisher:
        for _ in range(3):
            assert task_of(publisher, "GRAY") == {"flag": "GRAY", "worker": "prod"}


def test_without_fallback_a_gray_task_waits_for_a_gray_worker():
    env = environment(fallback=False)
    queue = env["SDK_TEST_QUEUE"]
    with Worker("prod", queue, env), Publisher(env) as publisher:
        with pytest.raises(httpx.HTTPError):  # the prod worker never takes it
            httpx.get(publisher.url, headers={"X-Gray-Status": "GRAY"}, timeout=3)
        with Worker("gray", f"{queue}.V2", env):
            assert task_of(publisher, "GRAY") == {"flag": "GRAY", "worker": "gray"}


# A route as the gateway sends it for lane feature-x, whose member version of order-app (the
# service consuming the tasks) is V3.
FEATURE_X = {"X-Gray-Lane": "feature-x", "X-Gray-Versions": "*=V1,order-app=V3/V1"}


def test_a_lane_task_runs_on_the_worker_of_its_version_at_the_consuming_service():
    env = environment()
    queue = env["SDK_TEST_QUEUE"]
    with (
        Worker("prod", queue, env),
        Worker("gray", f"{queue}.V2", env),
        Worker("lane", f"{queue}.V3", env),
        Publisher(env) as publisher,
    ):
        lane_task = until_gray_worker_seen(
            lambda: task_of(publisher, "GRAY", **FEATURE_X), worker="lane"
        )
        # The worker restored the whole route, for the task's own calls and subtasks.
        assert lane_task == {
            "flag": "GRAY",
            "lane": "feature-x",
            "versions": FEATURE_X["X-Gray-Versions"],
            "worker": "lane",
        }
        until_gray_worker_seen(lambda: task_of(publisher, "GRAY"))
        gray_lane = {"X-Gray-Lane": "gray", "X-Gray-Versions": "*=V2/V1"}
        assert task_of(publisher, "GRAY", **gray_lane)["worker"] == "gray"
        # A lane that asks order-app for prod, a lane without the versions (no gateway sent
        # them: nothing says its version here), and a quarantined lane version: the base
        # queue, never another lane's (or the gray lane's) worker.
        not_a_member = {"X-Gray-Lane": "feature-y", "X-Gray-Versions": "*=V1,user-app=V3/V1"}
        quarantined = {**FEATURE_X, "X-Gray-Versions": "*=V1,order-app=V3/V1,!order-app=V3"}
        for route in (not_a_member, {"X-Gray-Lane": "feature-x"}, quarantined):
            assert task_of(publisher, "GRAY", **route)["worker"] == "prod", route


def test_with_no_lane_worker_a_lane_task_falls_back_to_prod_with_its_route():
    env = environment()
    queue = env["SDK_TEST_QUEUE"]
    with (
        Worker("prod", queue, env),
        Worker("gray", f"{queue}.V2", env),
        Publisher(env) as publisher,
    ):
        until_gray_worker_seen(lambda: task_of(publisher, "GRAY"))  # the probe has answered
        for _ in range(3):
            assert task_of(publisher, "GRAY", **FEATURE_X) == {
                "flag": "GRAY",
                "lane": "feature-x",
                "versions": FEATURE_X["X-Gray-Versions"],
                "worker": "prod",
            }
