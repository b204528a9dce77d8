"""The gateway endpoints served straight from ASGI (gateways/protocol/asgi.py)."""

import asyncio
import json
import random
from urllib.parse import parse_qsl

import pytest

from gateways import generation
from gateways.protocol.asgi import _gateway_call, _query
from gateways.protocol.endpoints import ack, poll
from gateways.tests.conftest import asgi_scope
from graylane.asgi import application


@pytest.mark.parametrize(
    "path,expected",
    [
        ("/api/v1/gateway-config/", (poll, {})),
        ("/api/v1/gateways/edge-1/ack/", (ack, {"name": "edge-1"})),
        ("/api/v1/gateways/pull_7/ack/", (ack, {"name": "pull_7"})),
        ("/api/v1/gateways/a/b/ack/", None),
        ("/api/v1/gateways/edge-1/", None),
        ("/api/v1/gateway-config/extra/", None),
    ],
)
def test_only_the_gateway_endpoints_take_the_short_path(path, expected):
    # Anything else must reach Django (middleware, sessions, DRF) untouched.
    assert _gateway_call(path) == expected


def test_a_poll_query_reads_as_django_reads_it_whatever_its_spelling():
    # The short path splits a query with nothing to unquote itself: the same pairs as
    # parse_qsl over queries made of the characters that change how one reads.
    rng = random.Random(27)
    for _ in range(20_000):
        raw = "".join(rng.choice("kn=&%+2f ;") for _ in range(rng.randint(0, 14)))
        assert _query(raw) == dict(parse_qsl(raw, keep_blank_values=True)), raw
    assert _query("known=7&wait=30&applied=7") == {"known": "7", "wait": "30", "applied": "7"}


@pytest.mark.django_db(transaction=True)
def test_a_long_poll_whose_gateway_went_away_is_dropped_at_once(make_gateway):
    _, token, _ = make_gateway("edge")
    known = generation.newest_number()
    sent = []

    async def run() -> float:
        disconnect = asyncio.Event()
        requests = [{"type": "http.request", "body": b"", "more_body": False}]

        async def receive():
            if requests:
                return requests.pop()
            await disconnect.wait()
            return {"type": "http.disconnect"}

        async def send(message):
            sent.append(message)

        query = f"known={known}&wait=30".encode()
        call = asyncio.create_task(
            application(asgi_scope("/api/v1/gateway-config/", token, query), receive, send)
        )
        await asyncio.sleep(0.5)
        assert not call.done(), "nothing changed: the poll waits"
        loop = asyncio.get_running_loop()
        gone = loop.time()
        disconnect.set()
        await asyncio.wait_for(call, 2)
        return loop.time() - gone

    assert asyncio.run(run()) < 0.5
    assert sent == [], "nobody to answer"


@pytest.mark.django_db(transaction=True)
def test_an_ack_through_asgi_has_the_api_answer(make_gateway):
    _, token, _ = make_gateway("edge")
    current = generation.newest_number()
    sent = []

    async def run():
        async def receive():
            body = json.dumps({"generation": current}).encode()
            return {"type": "http.request", "body": body, "more_body": False}

        async def send(message):
            sent.append(message)

        await application(
            asgi_scope("/api/v1/gateways/edge/ack/", token, method="POST"), receive, send
        )

    asyncio.run(run())
    start, body = sent
    assert start["status"] == 200
    headers = dict(start["headers"])
    assert headers[b"content-type"] == b"application/json"
    assert int(headers[b"content-length"]) == len(body["body"])
    assert json.loads(body["body"]) == {
        "name": "edge",
        "acked_generation": current,
        "status": "in_sync",
    }
