"""Test services for the flag tests, run as real processes:

    python -m dataplane.sdk.tests.flag_app asgi PORT
    python -m dataplane.sdk.tests.flag_app wsgi PORT ECHO_URL
    python -m dataplane.sdk.tests.flag_app registered PORT REGISTRY_URL VERSION

(`registered`: the ASGI app as instance VERSION of service `chain`, registered through the
SDK's lifecycle, REGISTRY_USERNAME / REGISTRY_PASSWORD from the environment.) Routes are
matched by their last path segment, so `/chain/fanout` through the gateway is `/fanout`.

`/echo` answers the flag headers it received (and the lane and versions headers, when it
received them); `/flag` the flag in the context, `/route` the whole route; `/fanout` (ASGI)
reports the flag (and under `routes`, the whole route) as seen across every hop the SDK must
carry it over, each outgoing call going to `/echo` of the same process; the WSGI app's `/call`
calls `/echo` with requests from a thread of ContextThreadPoolExecutor, to the ECHO_URL
given.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from concurrent.futures import ThreadPoolExecutor
from wsgiref.simple_server import WSGIRequestHandler, make_server

import httpx
import uvicorn

from dataplane.registry_client import NamingClient
from dataplane.sdk.flag import (
    ContextThreadPoolExecutor,
    current_flag,
    current_route,
    run_with_flag,
)
from dataplane.sdk.httpx_flag import httpx_async_hooks, httpx_hooks
from dataplane.sdk.lifecycle import Lifecycle
from dataplane.sdk.middleware import GrayFlagASGIMiddleware, GrayFlagWSGIMiddleware
from dataplane.sdk.requests_flag import gray_session

PORT = int(sys.argv[2]) if len(sys.argv) > 2 else 0
# The WSGI server is single-threaded (so a flag left set would show in its next request): its
# calls go to another process's /echo.
REGISTERED = len(sys.argv) > 1 and sys.argv[1] == "registered"
ECHO = sys.argv[3] if len(sys.argv) > 3 and not REGISTERED else f"http://127.0.0.1:{PORT}/echo"
carrying_pool = ContextThreadPoolExecutor(2)
plain_pool = ThreadPoolExecutor(2)
session = gray_session()


def _echoed(headers) -> dict:
    echoed = {"header": headers.get("x-gray-status"), "baggage": headers.get("baggage")}
    for key, name in (("lane", "x-gray-lane"), ("versions", "x-gray-versions")):
        if name in headers:
            echoed[key] = headers[name]
    return echoed


def _route() -> list | None:
    route = current_route()
    return None if route is None else [route.flag, route.lane, route.versions]


def _httpx_sync() -> dict:
    with httpx.Client(event_hooks=httpx_hooks()) as client:
        return client.get(ECHO).json()


def _requests() -> dict:
    return session.get(ECHO, headers={"baggage": "tenant=acme"}).json()


async def _httpx_async() -> dict:
    async with httpx.AsyncClient(event_hooks=httpx_async_hooks()) as client:
        return (await client.get(ECHO)).json()


async def _fanout() -> dict:
    loop = asyncio.get_running_loop()

    async def in_task():
        await asyncio.sleep(0.01)
        return current_flag()

    task = asyncio.create_task(in_task())
    await asyncio.sleep(0)
    routes = {
        "request": _route(),
        "to_thread_in_task": await asyncio.create_task(asyncio.to_thread(_route)),
        "context_pool": await loop.run_in_executor(carrying_pool, _route),
        "plain_pool_run_with_flag": plain_pool.submit(run_with_flag(_route)).result(),
    }
    return {
        "routes": routes,
        "version": os.environ.get("FLAG_APP_VERSION"),
        "request": current_flag(),
        "create_task": await task,
        "to_thread": await asyncio.to_thread(current_flag),
        "context_pool": await loop.run_in_executor(carrying_pool, current_flag),
        "context_pool_submit": carrying_pool.submit(current_flag).result(),
        "plain_pool": await loop.run_in_executor(plain_pool, current_flag),
        "plain_pool_run_with_flag": plain_pool.submit(run_with_flag(current_flag)).result(),
        "httpx_async": await _httpx_async(),
        "httpx_async_in_task": await asyncio.create_task(_httpx_async()),
        "httpx_sync": await asyncio.to_thread(_httpx_sync),
        "requests": await loop.run_in_executor(carrying_pool, _requests),
    }


async def _answer(send, body: dict) -> None:
    payload = json.dumps(body).encode()
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/json")]})  # fmt: skip
    await send({"type": "http.response.body", "body": payload})


async def asgi_app(scope, receive, send) -> None:
    if scope["type"] != "http":
        return
    headers = {name.decode(): value.decode() for name, value in scope["headers"]}
    route = scope["path"].rsplit("/", 1)[-1]
    if route == "echo":
        await _answer(send, _echoed(headers))
    elif route == "fanout":
        await _answer(send, await _fanout())
    elif route == "route":
        await _answer(send, {"route": _route()})
    else:
        await _answer(send, {"flag": current_flag()})


def wsgi_app(environ, start_response):
    if environ["PATH_INFO"] == "/echo":
        body = {"header": environ.get("HTTP_X_GRAY_STATUS"), "baggage": environ.get("HTTP_BAGGAGE")}
    elif environ["PATH_INFO"] == "/route":
        body = {"route": _route()}
    elif environ["PATH_INFO"] == "/call":
        body = {"flag": current_flag(), "requests": carrying_pool.submit(_requests).result()}
    else:
        body = {"flag": current_flag()}
    start_response("200 OK", [("Content-Type", "application/json")])
    return [json.dumps(body).encode()]


class _Quiet(WSGIRequestHandler):
    def log_message(self, *args) -> None:
        pass


if __name__ == "__main__":
    if REGISTERED:
        registry = NamingClient(
            sys.argv[3],
            username=os.environ.get("REGISTRY_USERNAME"),
            password=os.environ.get("REGISTRY_PASSWORD"),
        )
        os.environ["FLAG_APP_VERSION"] = sys.argv[4]
        app = Lifecycle(GrayFlagASGIMiddleware(asgi_app), service="chain", version=sys.argv[4],
                        port=PORT, registry=registry)  # fmt: skip
        uvicorn.run(app, host="127.0.0.1", port=PORT, log_level="warning", lifespan="on")
    elif sys.argv[1] == "asgi":
        uvicorn.run(GrayFlagASGIMiddleware(asgi_app), host="127.0.0.1", port=PORT,
                    log_level="warning", lifespan="off")  # fmt: skip
    else:
        server = make_server("127.0.0.1", PORT, GrayFlagWSGIMiddleware(wsgi_app),
                             handler_class=_Quiet)  # fmt: skip
        server.serve_forever()
