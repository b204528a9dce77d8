"""A service that is slow while cold, for the replay warm-up test and bench/warmup.py, run
as a real process configured as a deployment would configure it (`lifecycle.from_env`):

    GRAYLANE_SERVICE=svc GRAYLANE_VERSION=V1 GRAYLANE_PORT=7301 \\
    GRAYLANE_REGISTRY_URL=http://127.0.0.1:8848/nacos GRAYLANE_WARMUP_PATHS=/svc/items/a \\
    GRAYLANE_WARMUP_SAMPLES=100 GRAYLANE_DASHBOARD_URL=... GRAYLANE_LIFECYCLE_TOKEN=... \\
    python -m dataplane.sdk.tests.cold_app --build-ms 60

`GET /{service}/items/{kind}`: the first request of each kind builds what the kind needs
(`--build-ms` of CPU on the event loop, as a lazy import, a template compiled or a cache
filled on first use would take), later ones answer at once. `POST` there is a write.
`GET /{service}/-/seen`: every request it had, in order: method, path, whether it was a
warm-up one, and the user header it carried.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import time

import uvicorn

from dataplane.sdk.lifecycle import WARMUP_HEADER, from_env

_WARMUP = WARMUP_HEADER.lower().encode()


def burn(seconds: float) -> None:
    """Spend `seconds` of CPU, as building something does."""
    until = time.process_time() + seconds
    digest = b""
    while time.process_time() < until:
        digest = hashlib.sha256(digest).digest()


class ColdApp:
    def __init__(self, service: str, build_s: float):
        self.service, self.build_s = service, build_s
        self.built: set[str] = set()
        self.seen: list[dict] = []

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return
        route = scope["path"].removeprefix(f"/{self.service}/")
        if route == "-/seen":
            return await _answer(send, 200, self.seen)
        headers = dict(scope["headers"])
        self.seen.append(
            {
                "method": scope["method"],
                "path": scope["path"],
                "warmup": _WARMUP in headers,
                "user": headers.get(b"x-user-no", b"").decode() or None,
            }
        )
        kind = route.removeprefix("items/")
        if kind == route or not kind:
            return await _answer(send, 404, {"error": scope["path"]})
        if kind not in self.built:
            burn(self.build_s)
            self.built.add(kind)
        await _answer(send, 200, {"kind": kind, "method": scope["method"]})


async def _answer(send, status: int, body) -> None:
    payload = json.dumps(body).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(payload))]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": payload})


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--build-ms", type=float, default=50.0)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    lifecycle = from_env(ColdApp(os.environ["GRAYLANE_SERVICE"], args.build_ms / 1000))
    uvicorn.run(
        lifecycle,
        host=lifecycle.host,
        port=lifecycle.port,
        lifespan="on",
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=3,
    )


if __name__ == "__main__":
    main()
