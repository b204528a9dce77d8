"""Failover between dashboard URLs (dataplane/dashboards.py), against real HTTP servers on
loopback: a replica that refuses connections or answers 5xx is passed over for the next,
within the same request, and the one that answered is kept."""

import asyncio

import httpx
import pytest

from dataplane.dashboards import FailoverTransport, dashboard_client, dashboard_urls
from dataplane.sdk.call_edges import CallEdgeReporter
from dataplane.sdk.lifecycle_report import LifecycleReporter
from testing.processes import free_port


class Replica:
    """A loopback HTTP server answering every request with `status` and, in its body, its
    name, the path it was asked and the body it received; `seen` counts its requests."""

    def __init__(self, name: str, status: int = 200):
        self.name, self.status, self.seen = name, status, 0

    async def __aenter__(self):
        self.server = await asyncio.start_server(self._answer, "127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"
        return self

    async def __aexit__(self, *exc_info):
        self.server.close()
        await self.server.wait_closed()

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        while head := await reader.readuntil(b"\r\n\r\n"):
            self.seen += 1
            lines = head.decode().split("\r\n")
            length = next(
                (
                    int(line.split(":")[1])
                    for line in lines
                    if line.lower().startswith("content-length")
                ),
                0,
            )
            body = (await reader.readexactly(length)).decode()
            path = lines[0].split()[1]
            text = f'{{"replica": "{self.name}", "path": "{path}", "body": {body or "null"}}}'
            writer.write(
                f"HTTP/1.1 {self.status} X\r\nContent-Length: {len(text)}\r\n\r\n{text}".encode()
            )
            await writer.drain()


def refused() -> str:
    """A URL where nothing listens."""
    return f"http://127.0.0.1:{free_port()}"


@pytest.mark.asyncio
async def test_a_replica_that_cannot_be_reached_is_passed_over_and_the_next_kept():
    async with Replica("b") as b, dashboard_client([refused(), b.url], "t") as client:
        first = await client.post("/api/v1/metrics/", json={"n": 1})
        assert first.json() == {"replica": "b", "path": "/api/v1/metrics/", "body": {"n": 1}}
        second = await client.get("/api/v1/gateway-config/?wait=1")
        assert second.json()["path"] == "/api/v1/gateway-config/?wait=1"
        assert isinstance(client._transport, FailoverTransport)
        assert client._transport.url == b.url  # kept: the dead one is not tried first
    assert b.seen == 2


@pytest.mark.asyncio
async def test_a_5xx_is_sent_on_to_the_next_replica_and_the_one_that_answered_is_kept():
    async with (
        Replica("a", 503) as a,
        Replica("b") as b,
        dashboard_client([a.url, b.url], "t") as client,
    ):
        assert (await client.post("/x", json=[1])).json()["replica"] == "b"
        a.status = 200  # back, but b still answers: the requests stay with b
        assert (await client.get("/y")).json()["replica"] == "b"
        b.status = 500  # now b fails: over to a, and around the list
        assert (await client.get("/z")).json() == {"replica": "a", "path": "/z", "body": None}
    assert (a.seen, b.seen) == (2, 3)


@pytest.mark.asyncio
async def test_when_no_replica_answers_the_caller_gets_the_last_error_or_5xx():
    async with (
        Replica("a", 502) as a,
        Replica("b", 500) as b,
        dashboard_client([a.url, b.url], "t") as client,
    ):
        assert (await client.get("/x")).status_code == 500
    async with dashboard_client([refused(), refused()], "t") as client:
        with pytest.raises(httpx.ConnectError):
            await client.get("/x")


@pytest.mark.asyncio
async def test_each_url_keeps_its_own_base_path():
    async with (
        Replica("a", 500) as a,
        Replica("b") as b,
        dashboard_client([a.url + "/graylane/", b.url + "/dash"], "t") as client,
    ):
        answer = await client.get("/api/v1/gateway-config/", params={"known": 3})
    assert answer.json()["path"] == "/dash/api/v1/gateway-config/?known=3"
    assert a.seen == 1


@pytest.mark.parametrize(
    ("value", "urls"),
    [
        ("http://a:1/, https://b", ("http://a:1", "https://b")),
        (["http://a:1"], ("http://a:1",)),
    ],
)
def test_dashboard_urls_are_read_in_order_without_trailing_slashes(value, urls):
    assert dashboard_urls(value) == urls


@pytest.mark.parametrize("value", ["", " , ", "a:1", "ftp://a", "http://"])
def test_a_list_without_urls_or_with_a_bad_one_is_refused(value):
    with pytest.raises(ValueError):
        dashboard_urls(value)


@pytest.mark.asyncio
async def test_the_sdks_reports_reach_the_replica_that_answers():
    async with Replica("b", 202) as b:
        urls = f"{refused()},{b.url}"
        edges = CallEdgeReporter(urls, "t", service="user-app", version="V2")
        edges.count("order-app", "V1", None, error=False)
        assert await edges.send()
        await edges.aclose()
        lifecycle = LifecycleReporter(urls, "t", service="user-app", host="127.0.0.1", port=1)
        lifecycle.report("starting")
        await lifecycle.flush()
    assert b.seen == 2
