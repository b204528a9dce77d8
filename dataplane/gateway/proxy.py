"""The client side: an asyncio protocol per client connection, requests parsed by httptools,
each routed (gray decision, instance pick) and relayed to an instance over the upstream
pool, bodies streamed both ways with flow control.

Hand-written on uvloop + httptools rather than over aiohttp's server and client: side by
side in one run (bench/gateway.py, which proxies the same upstream through both), this one
answered more requests per second at a lower added latency; the figures are in
bench/README.md. See it with:

    .venv/bin/python bench/gateway.py

Retries (docs/gateway.md): a request moves to another instance when the connection could
not be made (nothing was sent), when an instance answers with the shutting-down marker
(503 + X-Instance-Shutting-Down: true: it did not run it), or, for idempotent methods
only, when the connection broke after the request was sent and before any byte of an
answer. A request whose body was too large to keep for a second sending is not retried
once any of it went out.

Limits (limits.py, docs/gateway.md): a request head over them is answered 414 or 431 as soon
as the byte that crosses one arrives, never read to its end, and the connection is closed.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import NoReturn

import httptools

from dataplane.gateway.headers import (
    HOP_BY_HOP,
    NOTHING,
    PLAIN_CONNECTION,
    REQUEST_HANDLED,
    ROUTE_HEADERS,
    connection_listed,
    strip_gray_baggage,
    without_listed,
)
from dataplane.gateway.limits import (
    HEADER_COUNT_LIMIT,
    HEADER_LIMIT,
    HEADERS_LIMIT,
    HEADERS_TOO_LARGE,
    LINE_TOO_LONG,
    REQUEST_LINE_LIMIT,
)
from dataplane.gateway.metrics import Metrics
from dataplane.gateway.replay import KeptBody, ReplayBudget
from dataplane.gateway.routing import Instance, RoutingTable, Service
from dataplane.gateway.sampling import Sampler
from dataplane.gateway.shadow import Copy, Shadower, chosen, shadow_head
from dataplane.gateway.upstream import (
    BrokeBeforeAnswer,
    ConnectFailed,
    UpstreamConnection,
    UpstreamError,
    UpstreamPool,
)
from routing_engine import PROD, CallerResolver
from routing_engine.balancer import Prepared

log = logging.getLogger(__name__)

IDEMPOTENT = frozenset((b"GET", b"HEAD", b"OPTIONS", b"TRACE", b"PUT", b"DELETE"))
# Body bytes waiting for an upstream connection before the client is asked to pause.
PENDING_LIMIT = 1 << 18
# httptools hands over a header only once it is whole. So a head still unfinished, or its
# line in progress, is also measured as it arrives, and refused once longer than any within
# the limits can be: the separators the limits do not count (colon, spaces, line ends) with
# room to spare included.
_SLACK = 64
_LINE_GUARD = max(REQUEST_LINE_LIMIT, HEADER_LIMIT) + _SLACK
_HEAD_GUARD = REQUEST_LINE_LIMIT + HEADERS_LIMIT + 4 * HEADER_COUNT_LIMIT + _SLACK
_TARGET_NEAR_LIMIT = REQUEST_LINE_LIMIT - 32  # llhttp's longest method, UNSUBSCRIBE, has 11
_LINE_TOO_LONG = LINE_TOO_LONG.encode()
_TOO_LARGE = HEADERS_TOO_LARGE.encode()
# A refused connection is closed once the client stops sending, or has sent this much more,
# or this long has passed: what it still sends is read and dropped meanwhile (nginx's
# lingering close). A connection closed with data unread is reset, and the answer may be
# lost with it.
LINGER_BYTES = 1 << 20
LINGER_SECONDS = 2.0
NO_VERSION = "none"
_DOT_SEGMENT = re.compile(rb"/\.\.?(?:/|$)")
_DOT = ord(".")
_REASONS = {status.value: status.phrase.encode() for status in HTTPStatus}
_NONE_TRIED: frozenset[tuple[str, int]] = frozenset()


@dataclass
class Context:
    """What every connection shares; `table` is replaced as new generations arrive."""

    table: RoutingTable | None
    pool: UpstreamPool
    resolver: CallerResolver
    metrics: Metrics
    request_timeout: float
    idle_timeout: float
    # (path) -> (status, content type, body) for the gateway's own pages, or None.
    admin: Callable[[bytes, RoutingTable | None], tuple[int, bytes, bytes] | None]
    replay: ReplayBudget = field(default_factory=ReplayBudget)
    sampler: Sampler | None = None  # None: sampling is off
    shadow: Shadower = field(default_factory=Shadower)


def _frame_chunk(data: bytes) -> bytes:
    return b"%x\r\n%b\r\n" % (len(data), data)


class _Retry(Exception):
    """The instance answered with the shutting-down marker."""


class _Refused(Exception):
    """Raised from a parser callback, it stops the parser at the byte that crossed a limit."""


class _Lingering(asyncio.Protocol):
    """A refused connection once its answer is written: the gateway's side is closed, and
    what the client still sends is read and dropped until the client closes its side,
    LINGER_BYTES more have come or LINGER_SECONDS have passed."""

    def __init__(self, transport: asyncio.Transport) -> None:
        self.transport = transport
        self.left = LINGER_BYTES
        self.timer = asyncio.get_running_loop().call_later(LINGER_SECONDS, transport.close)
        transport.write_eof()  # the answer is all: the client sees its end
        transport.resume_reading()

    def data_received(self, data: bytes) -> None:
        self.left -= len(data)
        if self.left < 0:
            self.transport.close()

    def eof_received(self) -> bool:
        return False  # closes the transport

    def connection_lost(self, exc) -> None:
        self.timer.cancel()


class Exchange:
    """One request, from its head to the end of its answer (the upstream Sink)."""

    __slots__ = (
        "client",
        "method",
        "url",
        "special",
        "plain",
        "watched",
        "listed",
        "version",
        "keep_alive",
        "body_framing",
        "pending",
        "pending_size",
        "kept",
        "replayable",
        "body_done",
        "upstream",
        "attempting",
        "deadline",
        "route",
        "candidates",
        "prepared",
        "head",
        "tried",
        "instance",
        "reused",
        "stale_retried",
        "failure",
        "chunked_out",
        "out",
        "answered",
        "started",
        "service",
        "metric_version",
        "lane",
        "status",
        "failed",
        "sample",
        "copy",
    )

    def __init__(
        self,
        client: ClientConnection,
        url: bytes,
        special: list[tuple[bytes, bytes]],
        plain: list[bytes],
        watched: frozenset[bytes],
        listed: frozenset[bytes],
        parser,
    ) -> None:
        self.client = client
        self.method: bytes = parser.get_method()
        self.url = url
        # The headers, sorted as they were parsed (ClientConnection.on_header): `special`,
        # (name, value) of those in `watched` (handled by the gateway, or read by the
        # decision) and of Proxy-*; `plain`, the others, as lines ready to pass on.
        self.special = special
        self.plain = plain
        self.watched = watched
        self.listed = listed  # what the Connection header declares hop-by-hop
        self.version: str = parser.get_http_version()
        self.keep_alive: bool = parser.should_keep_alive()
        # How the body goes upstream: b"" (none), b"length" or b"chunked" (re-chunked).
        self.body_framing = b""
        for name, _ in special:
            if name == b"transfer-encoding":
                self.body_framing = b"chunked"
                break
            if name == b"content-length":
                self.body_framing = b"length"
        self.pending: list[bytes] = []  # framed body bytes not yet sent upstream
        self.pending_size = 0
        self.kept: KeptBody | None = None  # framed body bytes sent, for a second sending
        self.replayable = True
        self.body_done = False
        self.upstream: UpstreamConnection | None = None
        # The attempt in flight: sent to `instance`, waiting for the head of its answer.
        self.attempting = False
        self.deadline = 0.0  # of the attempt in flight, checked by the connection's timer
        self.route: Service | None = None
        self.candidates: list[Instance] = []
        self.prepared: Prepared = []
        self.head = b""
        # Instances whose attempt failed, not to be tried again for this request.
        self.tried: frozenset[tuple[str, int]] = _NONE_TRIED
        self.instance: Instance | None = None
        self.reused = False  # the attempt went out on a kept-alive connection
        self.stale_retried = False
        self.failure = (503, b"No instance of the service is available.")
        self.chunked_out = False
        # Answer bytes for the client, written at once when the instance's data is parsed
        # (the head and the first piece of the body in one send, not two).
        self.out: list[bytes] = []
        self.answered = False  # an answer head went to the client
        # Not loop.time(): uvloop's clock is libuv's, cached per loop turn in whole
        # milliseconds, which reported most sub-millisecond requests as 0 or 1 ms.
        self.started = time.perf_counter()
        self.service = ""
        self.metric_version = NO_VERSION
        self.lane: str | None = None  # of a GRAY request, for its metrics
        self.status = 0
        self.failed = False
        # A sampled request's attributes (sampling.py), completed when it is finished.
        self.sample: dict | None = None
        self.copy: Copy | None = None  # shadow traffic: the copy to send once answered

    # The request body, as the client sends it.
    def body(self, data: bytes) -> None:
        if not self.body_framing:
            return  # a request answered by the gateway itself: its body is read and dropped
        self._send(_frame_chunk(data) if self.body_framing == b"chunked" else data)

    def _send(self, data: bytes) -> None:
        upstream = self.upstream
        if upstream is not None and upstream.sink is self:
            upstream.write(data)
            self._keep(data)
        else:
            self.pending.append(data)
            self.pending_size += len(data)
            if self.pending_size > PENDING_LIMIT:
                self.client.pause_reading_for(self)

    def _keep(self, data: bytes) -> None:
        if not self.replayable:
            return
        kept = self.kept
        if kept is None:
            kept = self.kept = KeptBody(self.client.context.replay)
        self.replayable = kept.keep(data)

    def forget_sent(self) -> None:
        """The request will not be sent again: what was kept of its body goes."""
        self.replayable = False
        if self.kept is not None:
            self.kept.drop()

    def send_again(self) -> None:
        """What went out of the body goes first on the next sending (kept again as it goes)."""
        if self.kept is not None and self.kept.size:
            self.pending.insert(0, self.kept.take())

    def can_send_again(self) -> bool:
        """Whether all of the body that went out is still at hand."""
        return self.replayable

    # Sink: the answer, as the instance sends it.
    def response_head(self, status, reason, lines, length, shutting_down) -> None:
        if status == 503 and shutting_down and self.replayable:
            self._detach()
            self._attempt_over(_Retry())
            return
        self.attempting = False  # the attempt got the head of an answer
        if self.kept is not None:
            self.forget_sent()  # answered: never sent again
        self.status = status
        out = self.out  # joined with the first piece of the body (flush)
        out.append(b"HTTP/1.1 %d %b\r\n" % (status, reason or _REASONS.get(status, b"Unknown")))
        out += lines
        if length is None or length < 0:
            if self.version == "1.1":
                self.chunked_out = True
                out.append(b"transfer-encoding: chunked\r\n")
            else:
                self.keep_alive = False  # an HTTP/1.0 client reads to the end of connection
        if not self.keep_alive:
            out.append(b"connection: close\r\n")
        elif self.version == "1.0":
            out.append(b"connection: keep-alive\r\n")
        out.append(b"\r\n")
        self.answered = True

    def _attempt_over(self, error: BaseException | None) -> None:
        """The attempt got the head of an answer (None), or failed before it."""
        if not self.attempting:
            return
        self.attempting = False
        if error is not None:
            self.client.attempt_failed(self, error)

    def time_out(self) -> None:
        if self.attempting:
            self._detach()
            self._attempt_over(TimeoutError())

    def _detach(self) -> None:
        upstream, self.upstream = self.upstream, None
        if upstream is not None:
            upstream.sink = None
            upstream.close()

    def response_body(self, data: bytes) -> None:
        if self.copy is not None:
            self.copy.prod_body.feed(data)
        self.out.append(_frame_chunk(data) if self.chunked_out else data)

    def flush(self) -> None:
        out = self.out
        if out:
            transport = self.client.transport
            if transport is not None:
                transport.write(out[0] if len(out) == 1 else b"".join(out))
            out.clear()

    def response_end(self, reusable: bool) -> None:
        upstream, self.upstream = self.upstream, None
        if upstream is not None:
            if reusable and self.body_done and not self.pending:
                upstream.pool.release(upstream)
            else:
                upstream.close()  # answered before the whole request went out
        if self.chunked_out:
            self.out.append(b"0\r\n\r\n")
        self.flush()
        self.client.finished(self)

    def response_failed(self, error: UpstreamError) -> None:
        self.upstream = None
        if self.attempting:
            self._attempt_over(error)
        elif self.answered:
            # Part of the answer went out already: only closing tells the client.
            log.warning("%s %s: %s", self.method.decode(), self.url.decode("latin-1"), error)
            self.flush()
            self.failed = True
            self.keep_alive = False
            self.client.finished(self)

    def upstream_writable(self, writable: bool) -> None:
        if writable:
            self.client.resume_reading_for(self)
        else:
            self.client.pause_reading_for(self)

    def abort(self) -> None:
        """The client went away."""
        self._detach()
        self.attempting = False
        if self.kept is not None:
            self.forget_sent()


class ClientConnection(asyncio.Protocol):
    # Compiled by mypyc (dataplane/gateway/compiled.py), an attribute may be deleted only
    # where the class says so.
    __deletable__ = ("parser",)

    def __init__(self, context: Context):
        self.context = context
        self.loop = asyncio.get_running_loop()
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpRequestParser(self)
        self.peer = ""
        self.peer_bytes = b""
        self.peer_trusted = False
        self.peer_city: str | None = None
        self.queue: deque[Exchange] = deque()  # the first is being answered
        self.parsing: Exchange | None = None
        self._to_serve: Exchange | None = None  # parsed by this data, served once it is fed
        self._url = b""
        self._special: list[tuple[bytes, bytes]] = []
        self._plain: list[bytes] = []
        self._watched = REQUEST_HANDLED
        self._connection = False  # the request's Connection header names other headers
        self._timer: asyncio.TimerHandle | None = None
        # The longest the timer may sleep: no deadline can then be missed (see _check_timers).
        self._tick = min(context.idle_timeout, context.request_timeout)
        self._idle_since: float | None = None  # None: a request is being read or answered
        self._paused_by: set[int] = set()
        self._closing = False
        # The head being read, for the limits. It is open from the connection's start, and
        # from each message's end to the end of the next one's headers; `_heads` counts
        # those that ended. Of an open head: how many bytes, and of its line in progress,
        # earlier data brought; the header bytes and headers it may still have.
        self._head_open = True
        self._heads = 0
        self._head_received = 0
        self._line_received = 0
        self._header_room = HEADERS_LIMIT
        self._headers_left = HEADER_COUNT_LIMIT
        self._refusal: tuple[int, bytes] | None = None

    # asyncio.Protocol
    def connection_made(self, transport) -> None:
        self.transport = transport
        peer = transport.get_extra_info("peername")
        self.peer = peer[0] if peer else ""
        self.peer_bytes = self.peer.encode()
        # Who the peer is does not change on its connection: asked once, not per request.
        resolver = self.context.resolver
        self.peer_trusted = bool(resolver.trusted) and resolver.is_trusted(self.peer)
        self.peer_city = None if self.peer_trusted else resolver.resolve(self.peer)[1]
        self._arm_idle()

    def data_received(self, data: bytes) -> None:
        heads = self._heads if self._head_open else -1
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            # Upgrade is hop-by-hop and dropped: the request is answered as plain HTTP, and
            # nothing after it on this connection is read.
            self._closing = True
        except httptools.HttpParserError:
            self._refuse(*(self._refusal or (400, b"A malformed HTTP request.")))
            return
        if heads == self._heads:
            self._head_arrived(data)
        exchange = self._to_serve
        if exchange is not None:
            # Served once the parser is done with this data: its body may follow the head in
            # it. No loop turn in between, no call_soon per request.
            self._to_serve = None
            self._serve(exchange)

    def connection_lost(self, exc) -> None:
        self._release()

    def _release(self) -> None:
        """Nothing more is read or written for this connection's requests."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        for exchange in self.queue:
            exchange.abort()
        self.queue.clear()
        self.transport = None
        # The parser holds this protocol's callbacks: without it, what the connection held
        # goes now, by reference counting, not at some later full collection.
        del self.parser

    def pause_writing(self) -> None:
        if self.queue and self.queue[0].upstream is not None:
            transport = self.queue[0].upstream.transport
            if transport is not None:
                transport.pause_reading()

    def resume_writing(self) -> None:
        if self.queue and self.queue[0].upstream is not None:
            transport = self.queue[0].upstream.transport
            if transport is not None:
                transport.resume_reading()

    # httptools callbacks
    def on_message_begin(self) -> None:
        self._url = b""
        self._special = []
        self._plain = []
        table = self.context.table
        self._watched = REQUEST_HANDLED if table is None else table.watched_headers
        self._connection = False
        self._header_room = HEADERS_LIMIT
        self._headers_left = HEADER_COUNT_LIMIT

    def on_url(self, url: bytes) -> None:
        # httptools hands the target over in pieces as they arrive: a long one is refused at
        # its first piece over the limit.
        target = self._url = self._url + url
        # The line is the method, a space, the target, a space and "HTTP/1.1"; the method is
        # asked for only when the target comes near the limit.
        if len(target) > _TARGET_NEAR_LIMIT and (
            len(self.parser.get_method()) + len(target) + 10 > REQUEST_LINE_LIMIT
        ):
            self._refuse_head(414, _LINE_TOO_LONG)

    def on_header(self, name: bytes, value: bytes) -> None:
        size = len(name) + len(value)
        room = self._header_room = self._header_room - size
        left = self._headers_left = self._headers_left - 1
        if size > HEADER_LIMIT or room < 0 or left < 0:
            self._refuse_head(431, _TOO_LARGE)
        # Sorted as parsed, by one set lookup: most headers become lines to pass on at once,
        # with no second pass over them (the prefix test is the Proxy-* family).
        name = name.lower()
        if name in self._watched or name[:6] == b"proxy-":
            self._special.append((name, value))
            if name == b"connection" and value.lower() not in PLAIN_CONNECTION:
                self._connection = True
        else:
            self._plain += (name, b": ", value, b"\r\n")

    def on_headers_complete(self) -> None:
        self._head_open = False
        self._heads += 1
        self._head_received = self._line_received = 0
        self._idle_since = None  # a request is being answered
        plain = self._plain
        listed = NOTHING
        if self._connection:
            listed = connection_listed(self._special)
            plain = without_listed(plain, listed)
        exchange = Exchange(
            self, self._url, self._special, plain, self._watched, listed, self.parser
        )
        self.parsing = exchange
        self.queue.append(exchange)
        if len(self.queue) == 1:
            self._to_serve = exchange
        else:
            self.pause_reading_for(self.queue[0])  # pipelined: one at a time

    def on_body(self, body: bytes) -> None:
        if self.parsing is not None:
            self.parsing.body(body)

    def on_message_complete(self) -> None:
        self._head_open = True
        exchange = self.parsing
        if exchange is not None:
            if exchange.body_framing == b"chunked":
                exchange._send(b"0\r\n\r\n")
            exchange.body_done = True
            self.parsing = None

    # limits
    def _refuse_head(self, status: int, detail: bytes) -> NoReturn:
        self._refusal = (status, detail)
        raise _Refused

    def _head_arrived(self, data: bytes) -> None:
        """`data` is all of a head not over yet: refused once it, or its line in progress,
        is longer than any within the limits can be."""
        received = self._head_received + len(data)
        newline = data.rfind(b"\n")
        line = self._line_received + len(data) if newline < 0 else len(data) - newline - 1
        if received > _HEAD_GUARD or line > _LINE_GUARD:
            self._refuse(431, _TOO_LARGE)
        self._head_received, self._line_received = received, line

    def _refuse(self, status: int, detail: bytes) -> None:
        """The parser cannot go on: the request is answered why, unless an earlier one is
        being answered, and the connection closed."""
        self._to_serve = None
        if self.parsing is None and not self.queue:
            self._answer_and_close(status, detail)
        else:
            self._close()

    # flow control: reading pauses while any exchange asks it to
    def pause_reading_for(self, exchange: Exchange) -> None:
        if not self._paused_by and self.transport is not None:
            self.transport.pause_reading()
        self._paused_by.add(id(exchange))

    def resume_reading_for(self, exchange: Exchange) -> None:
        paused_by = self._paused_by
        if paused_by:
            paused_by.discard(id(exchange))
            if not paused_by and self.transport is not None and not self._closing:
                self.transport.resume_reading()

    def write(self, data: bytes) -> None:
        if self.transport is not None:
            self.transport.write(data)

    # Answering: callbacks all the way (a request costs no task), but for connecting to an
    # instance when no kept-alive connection to it is idle.
    def _serve(self, exchange: Exchange) -> None:
        try:
            self._route(exchange)
            self._attempt(exchange)
        except Exception:
            log.exception("proxying %s failed", exchange.url.decode("latin-1"))
            self._broken(exchange)

    def _broken(self, exchange: Exchange) -> None:
        exchange.abort()
        if not exchange.answered:
            self._answer(exchange, 500, b"The gateway failed.")
        else:
            exchange.keep_alive = False
            self.finished(exchange)

    def _route(self, exchange: Exchange) -> None:
        """Decide the request's route and make its head for the instances, or answer it
        (then `exchange.route` stays None)."""
        context = self.context
        path = exchange.url.partition(b"?")[0]
        # A byte looked for is a memchr; `b"/." in path` cost 2,000 instructions per request.
        if path[:1] != b"/" or (_DOT in path and _DOT_SEGMENT.search(path)):
            self._answer(exchange, 400, b"Only paths of the form /{service}/{path}.")
            return
        table = context.table
        name = path[1:].partition(b"/")[0].decode("latin-1")
        service = table.services.get(name) if table is not None else None
        if service is None:
            page = context.admin(path, table)
            if page is not None:
                self._answer(exchange, page[0], page[2], content_type=page[1])
            elif table is None:
                self._answer(exchange, 503, b"The gateway has no configuration yet.")
            else:
                self._answer(exchange, 404, b"No service named %b." % name.encode())
            return
        assert table is not None
        exchange.service = name
        exchange.route = service
        exchange.head, key = self._upstream_head(exchange, table, service)
        version, exchange.candidates = service.by_route[key]
        exchange.prepared = service.prepared[key]
        exchange.metric_version = version or NO_VERSION
        if key == PROD and service.mirror is not None and chosen(
            service.mirror, exchange.method, exchange.url, bool(exchange.body_framing),
            self.peer_bytes,
        ):  # fmt: skip
            exchange.copy = Copy(
                name,
                exchange.metric_version,
                path.decode("latin-1"),
                shadow_head(exchange.head, exchange.method),
                service.mirror,
            )

    def _upstream_head(
        self, exchange: Exchange, table: RoutingTable, service: Service
    ) -> tuple[bytes, str]:
        """The request head for the instance, and the key of the request's route
        (routing.route_key)."""
        listed = exchange.listed
        decision_headers = table.decision_headers
        decide_on: dict[str, str] = {}
        forwarded_for = forwarded_proto = baggage = None
        lines = [exchange.method, b" ", exchange.url, b" HTTP/1.1\r\n"]
        lines += exchange.plain
        if exchange.watched is not table.watched_headers:
            # The table changed while the head was parsed: its decision may read other
            # headers than those picked out.
            plain = exchange.plain
            for at in range(0, len(plain), 4):
                if plain[at] in decision_headers:
                    decide_on[plain[at].decode("latin-1")] = plain[at + 2].decode("latin-1")
        has_host = False
        expect_continue = False
        for name, value in exchange.special:
            if name in REQUEST_HANDLED or name in listed or name[:6] == b"proxy-":
                if name in HOP_BY_HOP or name in listed or name[:6] == b"proxy-":
                    continue
                if name == b"content-length":
                    if exchange.body_framing == b"length":
                        lines += (b"content-length: ", value, b"\r\n")
                    continue
                if name == b"x-forwarded-for":
                    forwarded_for = (
                        value if forwarded_for is None else forwarded_for + b", " + value
                    )
                    continue
                if name == b"x-forwarded-proto":
                    forwarded_proto = value
                    continue
                if name in ROUTE_HEADERS:
                    continue
                if name == b"expect":
                    expect_continue = value.strip().lower() == b"100-continue"
                    continue
                if name == b"baggage":
                    # The client's other members go on, before ours, in one header.
                    value = strip_gray_baggage(value)
                    if value:
                        baggage = value if baggage is None else baggage + b"," + value
                    continue
                if name == b"host":
                    has_host = True
            if name in decision_headers:
                decide_on[name.decode("latin-1")] = value.decode("latin-1")
            lines += (name, b": ", value, b"\r\n")
        if exchange.body_framing == b"chunked":
            lines.append(b"transfer-encoding: chunked\r\n")
        if self.peer_trusted:
            client_ip, city = self.context.resolver.resolve(
                self.peer,
                forwarded_for.decode("latin-1") if forwarded_for is not None else None,
                decide_on.get(table.city_header),
            )
        else:
            client_ip, city = self.peer, self.peer_city
        decide = service.decide or table.matcher.decide
        decision = decide(decide_on, ip=client_ip, city=city or "")
        exchange.lane = decision.lane
        sampler = self.context.sampler
        if sampler is not None and sampler.wants():
            exchange.sample = {
                "ts": round(time.time(), 3),
                "service": exchange.service,
                "method": exchange.method.decode("latin-1"),
                "path": exchange.url.partition(b"?")[0].decode("latin-1"),
                "ip": client_ip,
                "user": decide_on.get(table.user_header) or None,
                "city": city or None,
                # What the decision read: the headers some rule names, no other.
                "headers": decide_on,
            }
        key = decision.lane or decision.flag  # routing.route_key
        route = table.routes[key]
        trusted = self.peer_trusted
        chain = (forwarded_for + b", " if forwarded_for else b"") + self.peer_bytes
        proto = forwarded_proto if trusted and forwarded_proto else b"http"
        lines += (
            b"x-forwarded-for: ",
            chain,
            b"\r\nx-forwarded-proto: ",
            proto,
            b"\r\n",
            route.head if baggage is None else b"baggage: " + baggage + route.after_baggage,
            b"" if has_host else b"host: gateway\r\n",
            b"\r\n",
        )
        if expect_continue and exchange.version == "1.1" and not exchange.body_done:
            self.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        return b"".join(lines), key

    def _pick(self, exchange: Exchange) -> Instance | None:
        """Of the route's candidates, one not tried, not ejected if any is not."""
        pool = self.context.pool
        service, candidates, tried = exchange.route, exchange.candidates, exchange.tried
        assert service is not None
        fresh = [i for i in candidates if i.address not in tried]
        healthy = [i for i in fresh if not pool.is_ejected(i.address)]
        # With every one ejected, trying one beats refusing the request.
        return service.balancer.pick(healthy or fresh)  # type: ignore[return-value]

    def _attempt(self, exchange: Exchange) -> None:
        """Send the request to the next instance to try, or answer why there is none."""
        service = exchange.route
        if service is None:
            return  # answered by the gateway itself (_route)
        pool = self.context.pool
        if exchange.tried or pool.ejected:
            instance = self._pick(exchange)
        else:
            instance = service.balancer.pick_prepared(exchange.prepared)  # type: ignore[assignment]
        if instance is None:
            self._answer(exchange, *exchange.failure)
            return
        exchange.instance = instance
        # A request sent again goes out on a new connection.
        upstream = None if exchange.stale_retried else pool.take_idle(instance.address)
        exchange.reused = upstream is not None
        if upstream is not None:
            self._send(exchange, upstream)
        else:
            self.loop.create_task(self._connect(exchange, instance))

    def _retry(self, exchange: Exchange, instance: Instance) -> None:
        exchange.tried = exchange.tried | {instance.address}
        self._attempt(exchange)

    async def _connect(self, exchange: Exchange, instance: Instance) -> None:
        try:
            upstream = await self.context.pool.connect(instance.address)
        except ConnectFailed as exc:
            log.info("%s: %s", instance.id, exc)
            exchange.failure = (502, b"No instance of the service could be reached.")
            upstream = None
        try:
            if self.transport is None:  # the client went away meanwhile
                if upstream is not None:
                    self.context.pool.release(upstream)
            elif upstream is None:
                self._retry(exchange, instance)  # nothing was sent: any request may go elsewhere
            else:
                self._send(exchange, upstream)
        except Exception:
            log.exception("proxying %s failed", exchange.url.decode("latin-1"))
            self._broken(exchange)

    def _send(self, exchange: Exchange, upstream: UpstreamConnection) -> None:
        """Send the request (what arrived of its body so far; the rest follows as it comes)
        and wait, by callbacks, for the head of the answer."""
        instance = exchange.instance
        assert instance is not None
        if exchange.kept is not None:
            exchange.send_again()
        upstream.begin(exchange, head_request=exchange.method == b"HEAD")
        exchange.upstream = upstream
        exchange.metric_version = instance.version or NO_VERSION
        exchange.attempting = True
        upstream.write(exchange.head)
        if exchange.pending:
            pending, exchange.pending, exchange.pending_size = exchange.pending, [], 0
            for data in pending:
                upstream.write(data)
                exchange._keep(data)
        if self._paused_by:
            self.resume_reading_for(exchange)
        # Checked by the connection's one timer (_check_timers), not a timer per attempt.
        exchange.deadline = self.loop.time() + self.context.request_timeout

    def attempt_failed(self, exchange: Exchange, error: BaseException) -> None:
        """The attempt failed before any answer: try another instance when that cannot
        repeat work (docs/gateway.md, Retries), else answer why."""
        instance = exchange.instance
        assert instance is not None
        pool = self.context.pool
        retry = False
        again = False  # the same instance may be tried once more
        if isinstance(error, _Retry):
            pool.eject(instance.address)
            exchange.failure = (503, b"Every instance tried is shutting down.")
            retry = exchange.can_send_again()
        elif isinstance(error, BrokeBeforeAnswer):
            log.info("%s at %s:%d: %s", instance.id, *instance.address, error)
            if exchange.reused and not exchange.stale_retried:
                # Likely a kept-alive connection the instance closed as the request went
                # out: the instance itself may be fine, and is tried once more.
                exchange.stale_retried = again = True
            else:
                pool.connect_failed(instance.address)
            exchange.failure = (502, b"The instance closed the connection without answering.")
            retry = exchange.method in IDEMPOTENT and exchange.can_send_again()
        elif isinstance(error, TimeoutError):
            exchange.failure = (504, b"The instance did not answer in time.")
        else:
            log.info("%s at %s:%d: %s", instance.id, *instance.address, error)
            exchange.failure = (502, b"The instance sent an unreadable answer.")
        if self.transport is None:
            return
        try:
            if retry and again:
                self._attempt(exchange)
            elif retry:
                self._retry(exchange, instance)
            else:
                self._answer(exchange, *exchange.failure)
        except Exception:
            log.exception("proxying %s failed", exchange.url.decode("latin-1"))
            self._broken(exchange)

    def _answer(
        self,
        exchange: Exchange,
        status: int,
        detail: bytes,
        content_type: bytes = b"application/json",
    ) -> None:
        """An answer of the gateway's own (an error, or one of its pages)."""
        if content_type == b"application/json":
            body = b'{"detail": "%b"}' % detail.replace(b"\\", b"\\\\").replace(b'"', b'\\"')
        else:
            body = detail
        exchange.status = status
        exchange.answered = True
        close = not exchange.keep_alive or not exchange.body_done
        exchange.keep_alive = not close
        self.write(
            b"HTTP/1.1 %d %b\r\ncontent-type: %b\r\ncontent-length: %d\r\n%b\r\n%b"
            % (
                status,
                _REASONS.get(status, b"Unknown"),
                content_type,
                len(body),
                b"connection: close\r\n" if close else b"",
                body,
            )
        )
        self.finished(exchange)

    def finished(self, exchange: Exchange) -> None:
        """The answer to the first queued request is complete."""
        if exchange.kept is not None:
            exchange.forget_sent()
        now = self.loop.time()
        if exchange.service:
            error = exchange.failed or exchange.status >= 500
            latency_ms = (time.perf_counter() - exchange.started) * 1000
            instance = exchange.instance
            self.context.metrics.record(
                exchange.service,
                exchange.metric_version,
                error,
                latency_ms,
                exchange.lane,
                None if instance is None else instance.label,
            )
            sample = exchange.sample
            if sample is not None and self.context.sampler is not None:
                sample["status"] = exchange.status
                sample["latency_ms"] = round(latency_ms, 3)
                self.context.sampler.record(sample)
            if exchange.copy is not None and not exchange.failed:
                self.context.shadow.launch(exchange.copy, exchange.status, latency_ms)
        if not exchange.body_done:
            exchange.keep_alive = False  # the rest of its body would be read as a request
        queue = self.queue
        if queue and queue[0] is exchange:
            queue.popleft()
        if not exchange.keep_alive or self._closing:
            self._close()
            return
        if queue:
            self.loop.call_soon(self._serve, queue[0])
        else:
            self._arm_idle(now)
        if self._paused_by:
            self.resume_reading_for(exchange)

    def _answer_and_close(self, status: int, detail: bytes) -> None:
        body = b'{"detail": "%b"}' % detail
        self.write(
            b"HTTP/1.1 %d %b\r\ncontent-type: application/json\r\ncontent-length: %d\r\n"
            b"connection: close\r\n\r\n%b" % (status, _REASONS[status], len(body), body)
        )
        self._closing = True
        transport = self.transport
        if transport is not None:
            self._release()
            transport.set_protocol(_Lingering(transport))

    def _close(self) -> None:
        self._closing = True
        if self.transport is not None:
            self.transport.close()

    # The idle and request timeouts: one timer per connection that re-arms itself, never
    # further ahead than the shorter timeout, so that a deadline set meanwhile (now + a
    # timeout) is never before it fires. Not a timer made and cancelled per request.
    def _arm_idle(self, now: float | None = None) -> None:
        self._idle_since = self.loop.time() if now is None else now
        if self._timer is None:
            self._timer = self.loop.call_later(self._tick, self._check_timers)

    def _check_timers(self) -> None:
        self._timer = None
        if self.transport is None:
            return
        now = self.loop.time()
        remaining = self._tick
        if self._idle_since is not None:
            left = self._idle_since + self.context.idle_timeout - now
            if left <= 0:
                self._close()
                return
            remaining = min(remaining, left)
        if self.queue and self.queue[0].attempting:
            exchange = self.queue[0]
            left = exchange.deadline - now
            if left <= 0:
                exchange.time_out()
                if self.transport is None or self._timer is not None:
                    return  # closed, or re-armed by the answer's end (_arm_idle)
            else:
                remaining = min(remaining, left)
        self._timer = self.loop.call_later(remaining, self._check_timers)
