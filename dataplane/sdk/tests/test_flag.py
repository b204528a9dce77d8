"""The gray flag across every hop a service makes, in real server processes over loopback:
ASGI (uvicorn) and WSGI (wsgiref, threaded) middleware, asyncio tasks, threads, pools, and
outgoing httpx (sync, async) and requests calls."""

import asyncio
import sys

import httpx
import pytest

from dataplane.sdk.flag import current_flag, use_flag
from dataplane.sdk.middleware import GrayFlagASGIMiddleware, GrayFlagWSGIMiddleware
from testing.processes import Process, free_port

pytestmark = pytest.mark.slow

GRAY_BAGGAGE = "graylane.gray=GRAY"


class FlagApp(Process):
    def __init__(self, kind: str, *extra: str):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        args = [sys.executable, "-m", "dataplane.sdk.tests.flag_app", kind, str(self.port), *extra]
        super().__init__(args, env=None)

    def is_ready(self) -> bool:
        try:
            return httpx.get(self.url + "/flag", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False


@pytest.fixture(scope="module")
def asgi():
    with FlagApp("asgi") as app:
        yield app


@pytest.fixture(scope="module")
def wsgi(asgi):
    with FlagApp("wsgi", asgi.url + "/echo") as app:
        yield app


@pytest.mark.parametrize("flag", ["GRAY", "PROD", "ALL"])
def test_the_flag_survives_every_hop(asgi, flag):
    seen = httpx.get(asgi.url + "/fanout", headers={"X-Gray-Status": flag.lower()}).json()
    baggage = f"graylane.gray={flag}"
    assert seen["request"] == flag
    assert seen["create_task"] == flag
    assert seen["to_thread"] == flag
    assert seen["context_pool"] == flag
    assert seen["context_pool_submit"] == flag
    assert seen["plain_pool_run_with_flag"] == flag
    for client in ("httpx_async", "httpx_async_in_task", "httpx_sync"):
        assert seen[client] == {"header": flag, "baggage": baggage}, client
    # requests: our baggage entry joins the caller's own, which is kept.
    assert seen["requests"] == {"header": flag, "baggage": f"tenant=acme,{baggage}"}


def test_a_plain_pool_loses_the_flag_which_is_why_the_wrappers_exist(asgi):
    seen = httpx.get(asgi.url + "/fanout", headers={"X-Gray-Status": "GRAY"}).json()
    assert seen["plain_pool"] is None


def test_no_flag_sends_none_on(asgi):
    seen = httpx.get(asgi.url + "/fanout").json()
    assert seen["create_task"] is None and seen["to_thread"] is None
    assert seen["httpx_async"] == {"header": None, "baggage": None}
    assert seen["requests"] == {"header": None, "baggage": "tenant=acme"}


def test_baggage_alone_carries_the_flag_and_junk_is_no_flag(asgi):
    only_baggage = {"baggage": "userId=7, graylane.gray=gray;ttl=1"}
    assert httpx.get(asgi.url + "/flag", headers=only_baggage).json() == {"flag": "GRAY"}
    both = {"X-Gray-Status": "PROD", "baggage": GRAY_BAGGAGE}
    assert httpx.get(asgi.url + "/flag", headers=both).json() == {"flag": "PROD"}
    assert httpx.get(asgi.url + "/flag", headers={"X-Gray-Status": "blue"}).json() == {"flag": None}


def test_wsgi_middleware_sets_and_clears_the_flag(wsgi):
    with httpx.Client(base_url=wsgi.url) as client:
        seen = client.get("/call", headers={"X-Gray-Status": "GRAY"}).json()
        assert seen == {
            "flag": "GRAY",
            "requests": {"header": "GRAY", "baggage": f"tenant=acme,{GRAY_BAGGAGE}"},
        }
        # The same thread's next request, without the header, has no flag.
        for _ in range(2):
            assert client.get("/flag").json() == {"flag": None}


def test_the_middleware_restores_the_callers_flag_when_the_request_is_over():
    seen = []

    def wsgi_app(environ, start_response):
        start_response("200 OK", [])
        return iter([current_flag().encode()])

    with use_flag("PROD"):
        body = GrayFlagWSGIMiddleware(wsgi_app)({"HTTP_X_GRAY_STATUS": "GRAY"}, lambda *a: None)
        seen.append(b"".join(body))  # the body is read with the request's flag
        assert current_flag() == "GRAY"  # until the server closes the response (PEP 3333)
        body.close()
        assert current_flag() == "PROD"

    async def asgi_app(scope, receive, send):
        seen.append(current_flag())
        raise RuntimeError("the app failed")

    async def serve_one():
        scope = {"type": "http", "headers": [(b"x-gray-status", b"GRAY")]}
        with pytest.raises(RuntimeError):
            await GrayFlagASGIMiddleware(asgi_app)(scope, None, None)
        return current_flag()

    assert asyncio.run(serve_one()) is None
    assert seen == [b"GRAY", "GRAY"]


LANE_ROUTE = {
    "X-Gray-Status": "GRAY",
    "X-Gray-Lane": "feature-x",
    "X-Gray-Versions": "*=V1,order-app=V3/V1,!pay-app=V2",
}


def test_the_lane_and_versions_go_on_unchanged_over_every_hop(asgi):
    seen = httpx.get(asgi.url + "/fanout", headers=LANE_ROUTE).json()
    route = ["GRAY", "feature-x", LANE_ROUTE["X-Gray-Versions"]]
    assert seen["routes"] == dict.fromkeys(
        ("request", "to_thread_in_task", "context_pool", "plain_pool_run_with_flag"), route
    )
    baggage = "graylane.gray=GRAY,graylane.lane=feature-x"
    sent = {"header": "GRAY", "lane": "feature-x", "versions": LANE_ROUTE["X-Gray-Versions"]}
    for client in ("httpx_async", "httpx_async_in_task", "httpx_sync"):
        assert seen[client] == {**sent, "baggage": baggage}, client
    assert seen["requests"] == {**sent, "baggage": f"tenant=acme,{baggage}"}


@pytest.mark.parametrize("kind", ["asgi", "wsgi"])
def test_a_lane_is_read_with_its_flag_from_the_headers_or_else_the_baggage(request, kind):
    app = request.getfixturevalue(kind)

    def route(**headers):
        return httpx.get(app.url + "/route", headers=headers).json()["route"]

    assert route(**LANE_ROUTE) == ["GRAY", "feature-x", LANE_ROUTE["X-Gray-Versions"]]
    lane_baggage = {"baggage": "graylane.lane=feature-x, graylane.gray=GRAY"}
    assert route(**lane_baggage) == ["GRAY", "feature-x", None]
    # A flag from the header takes its lane from the header only; PROD has no lane; a lane
    # that is no lane name is none (the gray lane).
    assert route(**{"X-Gray-Status": "GRAY"}, **lane_baggage) == ["GRAY", None, None]
    assert route(**{**LANE_ROUTE, "X-Gray-Status": "PROD"})[:2] == ["PROD", None]
    assert route(**{**LANE_ROUTE, "X-Gray-Lane": "Feature X"})[:2] == ["GRAY", None]
