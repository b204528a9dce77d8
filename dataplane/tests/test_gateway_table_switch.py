"""A configuration that arrives while a request head is being read: the request is decided
by the table in force when it is routed, reading the headers that table's rules name, though
they were sorted as plain lines under the old one (proxy.py picks out only the headers the
table in force at the head's start reads)."""

import asyncio
import json

import pytest

from dataplane.gateway.metrics import Metrics
from dataplane.gateway.proxy import ClientConnection, Context
from dataplane.gateway.routing import RoutingTable
from dataplane.gateway.upstream import UpstreamPool
from routing_engine import CallerResolver


def table(header: str, port: int) -> RoutingTable:
    gray = {
        "enabled": True,
        "routing": True,
        "header": {"name": header, "value": "1"},
        "ips": [],
        "cities": [],
        "users": [],
        "user_header": "X-User-No",
        "city_header": "X-City",
        "percent": 0,
    }
    instances = [
        {"id": v, "host": "127.0.0.1", "port": port, "version": v, "weight": 1}
        for v in ("V1", "V2")
    ]
    document = {
        "generation": 1,
        "revision": 1,
        "gray": gray,
        "services": {"svc": {"prod": "V1", "gray": "V2", "instances": instances}},
    }
    return RoutingTable.from_document(json.dumps(document).encode())


@pytest.mark.asyncio
async def test_a_table_installed_mid_head_decides_on_the_headers_it_names():
    heads: asyncio.Queue[bytes] = asyncio.Queue()

    async def instance(reader, writer):
        await heads.put(await reader.readuntil(b"\r\n\r\n"))
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
        await writer.drain()

    upstream = await asyncio.start_server(instance, "127.0.0.1", 0)
    port = upstream.sockets[0].getsockname()[1]
    context = Context(
        table=table("X-Old-Rule", port),
        pool=UpstreamPool(),
        resolver=CallerResolver(),
        metrics=Metrics(),
        request_timeout=5,
        idle_timeout=5,
        admin=lambda path, table: None,
    )
    loop = asyncio.get_running_loop()
    gateway = await loop.create_server(lambda: ClientConnection(context), "127.0.0.1", 0)
    reader, writer = await asyncio.open_connection("127.0.0.1", gateway.sockets[0].getsockname()[1])
    try:
        writer.write(b"GET /svc/x HTTP/1.1\r\nHost: gw\r\nX-New-Rule: 1\r\n")
        await writer.drain()
        await asyncio.sleep(0.1)  # the gateway has read these lines under the old table
        context.table = table("X-New-Rule", port)
        writer.write(b"\r\n")
        await writer.drain()
        head = (await asyncio.wait_for(heads.get(), 5)).lower()
        assert b"x-gray-status: gray\r\n" in head
        assert b"x-new-rule: 1\r\n" in head  # still passed on
        answer = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
        assert answer.startswith(b"HTTP/1.1 200 ")
    finally:
        writer.close()
        gateway.close()
        upstream.close()
        context.pool.close_idle(older_than=0)
