"""Connections to instances: kept alive and reused, one exchange at a time each, answers
parsed by httptools as they arrive and handed on piece by piece (the body is streamed,
never gathered). Instances that refuse connections are ejected for a while (passive
health checking).

An exchange tells apart how it failed, because that decides whether the gateway may send
the request again: ConnectFailed (nothing was sent), BrokeBeforeAnswer (sent, then the
connection closed or was reset before any byte of an answer: the instance may or may not
have acted on it), BrokeMidAnswer (part of an answer was passed on already).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Protocol

import httptools

from dataplane.gateway.headers import (
    ANSWER_HANDLED,
    NOTHING,
    PLAIN_CONNECTION,
    SHUTTING_DOWN,
    connection_listed,
    without_listed,
)

Address = tuple[str, int]


class UpstreamError(Exception):
    pass


class ConnectFailed(UpstreamError):
    pass


class BrokeBeforeAnswer(UpstreamError):
    pass


class BrokeMidAnswer(UpstreamError):
    pass


class Sink(Protocol):
    """Who receives an answer: the client side of the exchange (proxy.py)."""

    # What it made of the data received so far, not yet written to its client.
    out: list[bytes]

    def response_head(
        self,
        status: int,
        reason: bytes,
        lines: list[bytes],
        length: int | None,
        shutting_down: bool,
    ) -> None:
        """`lines`: the header lines to pass on, [name, b": ", value, b"\r\n", ...], the
        hop-by-hop ones already left out."""

    def response_body(self, data: bytes) -> None: ...
    def flush(self) -> None: ...
    def response_end(self, reusable: bool) -> None: ...
    def response_failed(self, error: UpstreamError) -> None: ...
    def upstream_writable(self, writable: bool) -> None: ...


class UpstreamConnection(asyncio.Protocol):
    # Compiled by mypyc (dataplane/gateway/compiled.py), an attribute may be deleted only
    # where the class says so.
    __deletable__ = ("parser",)
    __slots__ = (
        "pool",
        "address",
        "transport",
        "sink",
        "parser",
        "lines",
        "listed",
        "reason",
        "length",
        "chunked",
        "shutting_down",
        "received",
        "head_done",
        "no_body",
        "to_close",
        "reusable",
        "idle_since",
        "closed",
    )

    def __init__(self, pool: UpstreamPool, address: Address):
        self.pool = pool
        self.address = address
        self.transport: asyncio.Transport | None = None
        self.sink: Sink | None = None
        self.closed = False
        self.idle_since = 0.0
        # One parser for the connection's life: after a complete answer it expects the next
        # (a connection whose answer was not complete is closed, never reused).
        self.parser = httptools.HttpResponseParser(self)

    def begin(self, sink: Sink, head_request: bool) -> None:
        self.sink = sink
        self._new_head()
        self.received = self.head_done = False
        self.no_body = head_request
        self.to_close = False
        self.reusable = True

    def write(self, data: bytes) -> None:
        assert self.transport is not None
        self.transport.write(data)

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    # asyncio.Protocol
    def connection_made(self, transport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        sink = self.sink
        if sink is None:
            self.close()  # an answer nobody asked for: this connection is out of step
            return
        self.received = True
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(BrokeMidAnswer(f"unreadable answer: {exc}"))
        if sink.out:
            sink.flush()  # what the sink made of this data goes out in one write

    def eof_received(self) -> bool:
        self._ended(None)
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.pool.forget(self)
        self._ended(exc)
        # The parser holds this protocol's callbacks: without it, the connection goes now, by
        # reference counting, not at some later full collection.
        del self.parser

    def pause_writing(self) -> None:
        if self.sink is not None:
            self.sink.upstream_writable(False)

    def resume_writing(self) -> None:
        if self.sink is not None:
            self.sink.upstream_writable(True)

    def _new_head(self) -> None:
        self.lines: list[bytes] = []
        self.listed: frozenset[bytes] = NOTHING
        self.reason = b""
        self.length: int | None = None
        self.chunked = self.shutting_down = False

    # httptools callbacks
    def on_status(self, reason: bytes) -> None:
        self.reason += reason

    def on_header(self, name: bytes, value: bytes) -> None:
        # Each header is sorted as it is parsed: passed on, or read and (if hop-by-hop)
        # dropped. No second pass over a list of headers.
        name = name.lower()
        if name not in ANSWER_HANDLED and name[:6] != b"proxy-":
            self.lines += (name, b": ", value, b"\r\n")
        elif name == b"content-length":
            self.length = int(value)
            self.lines += (name, b": ", value, b"\r\n")
        elif name == SHUTTING_DOWN:
            self.shutting_down = value.strip().lower() == b"true"
            self.lines += (name, b": ", value, b"\r\n")
        elif name == b"transfer-encoding":
            self.chunked = True
        elif name == b"connection" and value.lower() not in PLAIN_CONNECTION:
            self.listed = self.listed | connection_listed([(name, value)])

    def on_headers_complete(self) -> None:
        parser = self.parser
        status = parser.get_status_code()
        if status < 200:
            # An interim answer (100 Continue; the gateway answered the client's Expect
            # itself): skipped, the final one follows on the same parser.
            self._new_head()
            return
        self.head_done = True
        self.reusable = parser.should_keep_alive()
        length = self.length
        chunked = self.chunked
        lines = without_listed(self.lines, self.listed) if self.listed else self.lines
        if self.no_body or status in (204, 304):
            length = 0
        elif chunked:
            length = None
        elif length is None:
            length = -1  # delimited by the end of the connection
        self.to_close = length == -1
        assert self.sink is not None
        self.sink.response_head(status, self.reason, lines, length, self.shutting_down)
        if self.no_body:
            # An answer to HEAD announces a body it does not have; httptools would wait for
            # it, so the exchange ends here and the connection is not reused.
            self.reusable = False
            self._finish()

    def on_body(self, body: bytes) -> None:
        if self.head_done and not self.no_body and self.sink is not None:
            self.sink.response_body(body)

    def on_message_complete(self) -> None:
        if self.head_done and not self.no_body:
            self._finish()

    # ends
    def _finish(self) -> None:
        """The answer is complete; the sink releases the connection to the pool or closes
        it (it alone knows whether all of the request was sent)."""
        sink, self.sink = self.sink, None
        if sink is None:
            return
        if not self.reusable:
            self.close()
        sink.response_end(self.reusable)

    def _ended(self, exc: Exception | None) -> None:
        if self.sink is None:
            return
        if self.head_done and self.to_close:
            self.reusable = False  # the body ends with the connection: it is complete
            self._finish()
        elif not self.received:
            self._fail(BrokeBeforeAnswer(f"the instance closed the connection unanswered ({exc})"))
        else:
            self._fail(BrokeMidAnswer("the instance closed the connection mid-answer"))

    def _fail(self, error: UpstreamError) -> None:
        self.close()
        sink, self.sink = self.sink, None
        if sink is not None:
            sink.response_failed(error)


class UpstreamPool:
    """Idle connections per instance address, and which addresses are ejected."""

    def __init__(
        self,
        *,
        connect_timeout: float = 2.0,
        idle_timeout: float = 4.0,
        max_idle: int = 64,
        eject_after: int = 3,
        eject_seconds: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.connect_timeout = connect_timeout
        self.idle_timeout = idle_timeout
        self.max_idle = max_idle
        self.eject_after = eject_after
        self.eject_seconds = eject_seconds
        self.clock = clock
        self._idle: dict[Address, list[UpstreamConnection]] = {}
        self._failures: dict[Address, int] = {}
        # Address -> until when it is ejected. Read directly on each request's path: empty,
        # the balancer's pick needs no filtering.
        self.ejected: dict[Address, float] = {}

    # passive ejection
    def has_ejections(self) -> bool:
        return bool(self.ejected)

    def is_ejected(self, address: Address) -> bool:
        until = self.ejected.get(address)
        if until is None:
            return False
        if self.clock() >= until:
            del self.ejected[address]
            self._failures.pop(address, None)
            return False
        return True

    def connect_failed(self, address: Address) -> None:
        failures = self._failures[address] = self._failures.get(address, 0) + 1
        if failures >= self.eject_after:
            self.eject(address)

    def eject(self, address: Address) -> None:
        self.ejected[address] = self.clock() + self.eject_seconds
        for connection in self._idle.pop(address, []):
            connection.close()

    # connections
    def take_idle(self, address: Address) -> UpstreamConnection | None:
        """A kept-alive connection from an earlier exchange, if one is idle."""
        idle = self._idle.get(address)
        while idle:
            connection = idle.pop()
            if not connection.closed:
                return connection
        return None

    async def connect(self, address: Address) -> UpstreamConnection:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(self.connect_timeout):
                _, connection = await loop.create_connection(
                    lambda: UpstreamConnection(self, address), *address
                )
        except (OSError, TimeoutError) as exc:
            self.connect_failed(address)
            raise ConnectFailed(f"connect to {address[0]}:{address[1]}: {exc}") from exc
        self._failures.pop(address, None)
        return connection

    def release(self, connection: UpstreamConnection) -> None:
        idle = self._idle.setdefault(connection.address, [])
        if connection.closed or len(idle) >= self.max_idle:
            connection.close()
            return
        connection.idle_since = self.clock()
        idle.append(connection)

    def forget(self, connection: UpstreamConnection) -> None:
        idle = self._idle.get(connection.address)
        if idle and connection in idle:
            idle.remove(connection)

    def close_idle(self, older_than: float | None = None) -> None:
        """Close connections idle for longer than the idle timeout (all with 0), before the
        instance closes them itself, which could cross a request on its way."""
        limit = self.clock() - (self.idle_timeout if older_than is None else older_than)
        for connections in self._idle.values():
            for connection in [c for c in connections if c.idle_since <= limit]:
                connections.remove(connection)
                connection.close()
