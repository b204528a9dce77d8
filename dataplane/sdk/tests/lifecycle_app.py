"""A service instance for the lifecycle tests and bench/lossless.py, run as a real process:

    python -m dataplane.sdk.tests.lifecycle_app --service svc --version V1 --port 7301 \\
        --registry http://127.0.0.1:8000/nacos --mode graceful|naive [--warmup-s 3]

(registry password in REGISTRY_PASSWORD, lifecycle token in GRAYLANE_LIFECYCLE_TOKEN.)

`GET|POST /{service}/work` takes `--work-ms` and answers `{"instance", "version"}`; before
its warm-up (`--warmup-s`, standing for loading caches) has ended it answers 500, as a cold
instance fails its first requests. `GET /{service}/-/stats`: how many requests it served,
and how many came while it was cold (warm-up replay requests apart).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os

import uvicorn

from dataplane.registry_client import NamingClient
from dataplane.sdk.lifecycle import WARMUP_HEADER, Lifecycle, Replay
from dataplane.sdk.lifecycle_report import LifecycleReporter
from dataplane.sdk.middleware import GrayFlagASGIMiddleware

_WARMUP = WARMUP_HEADER.lower().encode()


class WorkApp:
    def __init__(self, service: str, version: str, port: int, work_s: float):
        self.service, self.version, self.port, self.work_s = service, version, port, work_s
        self.warm = False
        self.served = self.cold = 0

    async def warm_up(self, seconds: float) -> None:
        await asyncio.sleep(seconds)
        self.warm = True

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return
        route = scope["path"].removeprefix(f"/{self.service}/")
        if route == "-/stats":
            return await _answer(send, 200, {"served": self.served, "cold": self.cold})
        if route != "work":
            return await _answer(send, 404, {"error": scope["path"]})
        while (await receive()).get("more_body"):
            pass
        replay = any(name == _WARMUP for name, _ in scope["headers"])
        if not self.warm:
            if not replay:
                self.cold += 1
            return await _answer(send, 500, {"error": "cold"})
        await asyncio.sleep(self.work_s)
        self.served += 1
        await _answer(send, 200, {"instance": self.port, "version": self.version})


async def _answer(send, status: int, body: dict) -> None:
    payload = json.dumps(body).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(payload))]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": payload})


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--service", default="svc")
    parser.add_argument("--version", default="V1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--registry", required=True)
    parser.add_argument("--username")
    parser.add_argument("--dashboard")
    parser.add_argument("--mode", choices=["graceful", "naive"], default="graceful")
    parser.add_argument("--warmup-s", type=float, default=0.0)
    parser.add_argument("--work-ms", type=float, default=20.0)
    parser.add_argument("--drain-s", type=float, default=5.0)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    app = WorkApp(args.service, args.version, args.port, args.work_ms / 1000)
    registry = NamingClient(
        args.registry, username=args.username, password=os.environ.get("REGISTRY_PASSWORD")
    )
    token = os.environ.get("GRAYLANE_LIFECYCLE_TOKEN")
    reporter = None
    if args.dashboard and token:
        reporter = LifecycleReporter(
            args.dashboard, token, service=args.service, host="127.0.0.1", port=args.port
        )
    lifecycle = Lifecycle(
        GrayFlagASGIMiddleware(app),
        service=args.service,
        version=args.version,
        port=args.port,
        registry=registry,
        reporter=reporter,
        warmups=[lambda: app.warm_up(args.warmup_s)],
        replay=Replay([f"/{args.service}/work"], successes=5),
        drain_s=args.drain_s,
        graceful=args.mode == "graceful",
    )
    uvicorn.run(
        lifecycle,
        host="127.0.0.1",
        port=args.port,
        lifespan="on",
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=3,
    )


if __name__ == "__main__":
    main()
