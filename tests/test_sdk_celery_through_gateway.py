"""The full link into a task queue: a request through the real gateway reaches a service on
the SDK, which publishes a Celery task under the gateway's decision (real Redis broker, real
`celery worker` processes); a gray request's task runs on the gray worker, a prod request's
on the prod one."""

import httpx
import pytest

from dataplane.sdk.tests.test_celery_flag import (
    REDIS_URL,
    Publisher,
    Worker,
    environment,
    until_gray_worker_seen,
)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        not REDIS_URL,
        reason="needs a Redis broker: set REDIS_URL (CI sets redis://127.0.0.1:6379/3)",
    ),
]
GRAY = {"gray": "gray-996"}


def test_a_gray_request_through_the_gateway_runs_its_task_on_the_gray_worker(lab):
    env = environment()
    queue = env["SDK_TEST_QUEUE"]
    with (
        Worker("prod", queue, env),
        Worker("gray", f"{queue}.V2", env),
        Publisher(env) as publisher,
    ):
        lab.register("task-app", publisher.port, "V1")
        lab.sync()
        lab.policy(enabled=True, routing=True, header={"name": "gray", "value": "gray-996"})
        gateway = lab.start_gateway()

        def task_of(headers: dict) -> dict:
            answer = httpx.get(gateway.url + "/task-app/task", headers=headers, timeout=15)
            assert answer.status_code == 200, answer.text
            return answer.json()

        until_gray_worker_seen(lambda: task_of(GRAY))
        # The task sees the gateway's whole route: flag, lane, and the versions of later hops.
        gray = {"flag": "GRAY", "lane": "gray", "versions": "*=V2/V1", "worker": "gray"}
        prod = {"flag": "PROD", "versions": "*=V1", "worker": "prod"}
        for _ in range(3):
            assert task_of(GRAY) == gray
            assert task_of({}) == prod
            # A caller cannot choose its own route: the gateway decides, and this is PROD.
            assert task_of({"X-Gray-Status": "GRAY", "X-Gray-Lane": "gray"}) == prod
