"""Passive ejection in the upstream pool: connects refused in a row take an instance out of
the rotation for a cool-down, and it comes back after it."""

import asyncio
import socket

import pytest

from dataplane.gateway.upstream import ConnectFailed, UpstreamPool


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]  # nothing listens once it is closed


@pytest.mark.asyncio
async def test_refused_connects_in_a_row_eject_an_instance_for_the_cool_down():
    now = [1000.0]
    pool = UpstreamPool(eject_after=3, eject_seconds=10, clock=lambda: now[0])
    address = ("127.0.0.1", closed_port())
    for attempt in range(3):
        assert not pool.is_ejected(address), f"ejected after {attempt} failures"
        with pytest.raises(ConnectFailed):
            await pool.connect(address)
    assert pool.is_ejected(address) and pool.has_ejections()
    now[0] += 9.9
    assert pool.is_ejected(address)
    now[0] += 0.2
    assert not pool.is_ejected(address), "back after the cool-down"
    assert not pool.has_ejections()


@pytest.mark.asyncio
async def test_a_successful_connect_resets_the_count_and_idle_connections_are_reused():
    server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    pool = UpstreamPool(eject_after=2)
    try:
        pool.connect_failed(("127.0.0.1", port))
        connection = await pool.connect(("127.0.0.1", port))
        pool.connect_failed(("127.0.0.1", port))
        assert not pool.is_ejected(("127.0.0.1", port)), "the count started again"
        assert pool.take_idle(("127.0.0.1", port)) is None
        pool.release(connection)
        assert pool.take_idle(("127.0.0.1", port)) is connection
        pool.release(connection)
        pool.close_idle(older_than=0)
        assert pool.take_idle(("127.0.0.1", port)) is None
    finally:
        server.close()
