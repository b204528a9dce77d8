"""A Celery app and an ASGI service publishing to it, for the Celery flag tests (real
`celery worker` processes, a real Redis broker):

    celery -A dataplane.sdk.tests.celery_app worker -Q <queue>          # prod worker
    celery -A dataplane.sdk.tests.celery_app worker -Q <queue>.V2       # gray worker
    uvicorn dataplane.sdk.tests.celery_app:service                      # publishes

`GET /task` (or `/{service}/task`, through a gateway) publishes `who` under the request's
route and answers what it returned: the route the task saw (its flag; its lane and versions
when it has them) and the worker (WORKER_NAME) that ran it. The queue is SDK_TEST_QUEUE, so
parallel runs on one Redis do not meet; the tasks are consumed by service `order-app`.
"""

from __future__ import annotations

import asyncio
import json
import os

from celery import Celery

from dataplane.sdk import celery_flag
from dataplane.sdk.flag import current_flag, current_route
from dataplane.sdk.middleware import GrayFlagASGIMiddleware

app = Celery("sdk_tests", broker=os.environ["REDIS_URL"], backend=os.environ["REDIS_URL"])
app.conf.task_default_queue = os.environ.get("SDK_TEST_QUEUE", "sdk-tests")
app.conf.broker_connection_retry_on_startup = True
celery_flag.install(
    app,
    "V2",
    service="order-app",
    fallback=os.environ.get("SDK_TEST_FALLBACK", "true") == "true",
    probe_interval_s=0.5,
)


@app.task
def who() -> dict:
    seen = {"flag": current_flag(), "worker": os.environ.get("WORKER_NAME")}
    route = current_route()
    if route is not None and route.lane is not None:
        seen["lane"] = route.lane
    if route is not None and route.versions is not None:
        seen["versions"] = route.versions
    return seen


async def _service(scope, receive, send) -> None:
    if scope["type"] != "http":
        return
    if not scope["path"].endswith("/task"):  # `/task`, or `/{service}/task` via a gateway
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})
        return
    body = json.dumps(await asyncio.to_thread(lambda: who.delay().get(timeout=10))).encode()
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": body})


service = GrayFlagASGIMiddleware(_service)
