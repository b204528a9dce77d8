"""One instance of a demo service (user-app or order-app, any version): a small ASGI app
served by uvicorn, built on the service SDK (dataplane/sdk/, docs/service-sdk.md): the gray
flag middleware, the client-side balancer for its downstream calls, and the lossless
lifecycle (registered with its `version` once warm; on SIGTERM disabled, drained, then
deregistered), each step reported to the dashboard when it has a token for that.

    python -m demo.service --service user-app --version V2 --port 7202 \\
        --registry http://127.0.0.1:8000/nacos --username demo-fleet --downstream order-app

Credentials come from the environment, not the command line every local user can read:
`REGISTRY_PASSWORD` (with `--username`), or `REGISTRY_ACCESS_TOKEN` (an accessToken, or
the API token of a `service` user, as the fleet of `make run` uses; that token also reports
the lifecycle and the calls it makes (call edges) to the dashboard, `--dashboard`, by default
the registry URL without `/nacos`).

The gateway forwards the whole path, service prefix included, so an instance answers:

* `GET /{service}/hello`: `{"service", "version", "instance", "flag", "downstream"}`. With
  `--downstream`, it first calls `GET /{downstream}/hello` on an instance it picks itself,
  by the request's `X-Gray-Status` (GRAY: the gray version, PROD: the prod version, ALL or
  none: any), as the reference design's balancer does, and in a lane by the version the
  gateway's `X-Gray-Versions` asks for there (the lane's, else prod), and passes all of it
  on (the SDK's ServiceBalancer); the answer it got is `downstream`. A leaf service has
  `"downstream": {}`.
* `GET /{service}/-/errors`: `{"rate": 0.05}`, the share of `hello` requests answered with
  an injected 500; `POST /{service}/-/errors?rate=0.2` changes it (0 to 1). Only directly,
  from this machine: through a proxy (`X-Forwarded-For`, as the gateway sends) it is 403.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import logging
import os
import random
from collections.abc import Awaitable, Callable, Mapping
from typing import Any
from urllib.parse import parse_qs

import httpx
import uvicorn

from dataplane.registry_client import NamingClient
from dataplane.sdk.balancer import NoInstance, ServiceBalancer
from dataplane.sdk.call_edges import CallEdgeReporter
from dataplane.sdk.flag import current_flag
from dataplane.sdk.lifecycle import DEFAULT_DRAIN_S, Lifecycle, Replay
from dataplane.sdk.lifecycle_report import LifecycleReporter
from dataplane.sdk.middleware import GrayFlagASGIMiddleware

log = logging.getLogger(__name__)

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict]]
Send = Callable[[dict], Awaitable[None]]

# Replay warm-up: this many /hello answers before the instance registers.
WARMUP_SUCCESSES = 3


def _is_direct(scope: Scope) -> bool:
    """From this machine and not relayed by a proxy."""
    if any(name in (b"x-forwarded-for", b"forwarded") for name, _ in scope["headers"]):
        return False
    client = scope.get("client")
    try:
        return client is not None and ipaddress.ip_address(client[0]).is_loopback
    except ValueError:
        return False


async def _answer(send: Send, status: int, body: Mapping[str, Any]) -> None:
    payload = json.dumps(body, separators=(",", ":")).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(payload))]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": payload})


class DemoService:
    """The ASGI app of one instance."""

    def __init__(
        self,
        *,
        service: str,
        version: str,
        host: str,
        port: int,
        registry: NamingClient,
        error_rate: float = 0.0,
        downstream: str | None = None,
        prod_version: str = "V1",
        gray_version: str = "V2",
        edges: CallEdgeReporter | None = None,
    ):
        self.service, self.version = service, version
        self.instance_name = f"{host}:{port}"
        self.error_rate = error_rate
        self.edges = edges
        self.downstream = (
            ServiceBalancer(registry, downstream, prod=prod_version, gray=gray_version, edges=edges)
            if downstream
            else None
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
        elif scope["type"] == "http":
            await self._http_request(scope, receive, send)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        """Inside the SDK's lifecycle, which registers the instance and closes the registry
        client: only the downstream balancer is this app's own."""
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                if self.downstream is not None:
                    await self.downstream.start()
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                if self.downstream is not None:
                    await self.downstream.aclose()
                if self.edges is not None:
                    await self.edges.aclose()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def _http_request(self, scope: Scope, receive: Receive, send: Send) -> None:
        prefix = f"/{self.service}/"
        path, method = scope["path"], scope["method"]
        if not path.startswith(prefix):
            return await _answer(send, 404, {"error": f"not a path of {self.service}: {path}"})
        route = path[len(prefix) :]
        if route == "hello" and method == "GET":
            return await self._hello(scope, send)
        if route == "-/errors" and method in ("GET", "POST"):
            return await self._errors(scope, send)
        await _answer(send, 404, {"error": f"no route {method} {path}"})

    def _me(self, flag: str | None) -> dict[str, Any]:
        return {
            "service": self.service,
            "version": self.version,
            "instance": self.instance_name,
            "flag": flag,
        }

    async def _hello(self, scope: Scope, send: Send) -> None:
        flag = current_flag()
        if random.random() < self.error_rate:
            return await _answer(send, 500, {**self._me(flag), "error": "injected error"})
        if self.downstream is None:
            return await _answer(send, 200, {**self._me(flag), "downstream": {}})
        status, downstream = await self._call_downstream(self.downstream)
        answer = {**self._me(flag), "downstream": downstream}
        await _answer(send, 200 if status == 200 else 502, answer)

    async def _call_downstream(self, balancer: ServiceBalancer) -> tuple[int, dict[str, Any]]:
        """The request's flag picks the instance and goes on with the call (the SDK)."""
        try:
            response = await balancer.request("GET", f"/{balancer.service}/hello")
            return response.status_code, response.json()
        except NoInstance as exc:
            return 503, {"error": str(exc)}
        except (httpx.HTTPError, ValueError) as exc:
            return 502, {"error": f"{balancer.service}: {exc!r}"}

    async def _errors(self, scope: Scope, send: Send) -> None:
        if scope["method"] == "POST":
            if not _is_direct(scope):
                return await _answer(send, 403, {"error": "only directly, from this machine"})
            query = parse_qs(scope["query_string"].decode("latin-1"))
            try:
                rate = float(query["rate"][0])
            except (KeyError, ValueError):
                return await _answer(send, 400, {"rate": ["A number from 0 to 1."]})
            if not 0.0 <= rate <= 1.0:
                return await _answer(send, 400, {"rate": ["A number from 0 to 1."]})
            self.error_rate = rate
            log.warning("%s %s: error rate now %.2f", self.service, self.version, rate)
        await _answer(send, 200, {"rate": self.error_rate})


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m demo.service", description=__doc__)
    parser.add_argument("--service", required=True)
    parser.add_argument("--version", required=True, help="registered as metadata `version`")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--registry", required=True, help="e.g. http://127.0.0.1:8000/nacos")
    parser.add_argument("--username", help="registry user; password in REGISTRY_PASSWORD")
    parser.add_argument("--error-rate", type=float, default=0.0)
    parser.add_argument("--downstream", help="service whose /hello this one calls")
    parser.add_argument("--prod-version", default="V1")
    parser.add_argument("--gray-version", default="V2")
    parser.add_argument(
        "--dashboard",
        help="where lifecycle events and call edges go: a URL, or several comma-separated, "
        "tried in turn (default: --registry's)",
    )
    parser.add_argument("--drain-s", type=float, default=DEFAULT_DRAIN_S)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    registry = NamingClient(
        args.registry,
        username=args.username,
        password=os.environ.get("REGISTRY_PASSWORD"),
        access_token=os.environ.get("REGISTRY_ACCESS_TOKEN") or None,
    )
    access_token = os.environ.get("REGISTRY_ACCESS_TOKEN")
    reporter = edges = None
    if access_token:
        dashboard = args.dashboard or args.registry.removesuffix("/").removesuffix("/nacos")
        reporter = LifecycleReporter(
            dashboard, access_token, service=args.service, host=args.host, port=args.port
        )
        edges = CallEdgeReporter(
            dashboard, access_token, service=args.service, version=args.version
        )
    app = DemoService(
        service=args.service,
        version=args.version,
        host=args.host,
        port=args.port,
        registry=registry,
        error_rate=args.error_rate,
        downstream=args.downstream,
        prod_version=args.prod_version,
        gray_version=args.gray_version,
        edges=edges,
    )
    lifecycle = Lifecycle(
        GrayFlagASGIMiddleware(app),
        service=args.service,
        version=args.version,
        host=args.host,
        port=args.port,
        registry=registry,
        reporter=reporter,
        replay=Replay([f"/{args.service}/hello"], successes=WARMUP_SUCCESSES),
        drain_s=args.drain_s,
        app_lifespan=True,
    )
    uvicorn.run(
        lifecycle,
        host=args.host,
        port=args.port,
        lifespan="on",
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=3,
    )


if __name__ == "__main__":
    main()
