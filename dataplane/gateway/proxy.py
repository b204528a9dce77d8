"""The client side: an asyncio protocol per client connection, requests parsed by httptools,
each routed (gray decision, instance pick) and relayed to an instance over the upstream
pool, bodies streamed both ways with flow control.

Hand-written on uvloop + httptools rather than over aiohttp's server and client: side by
side in one run (bench/gateway.py, which proxies the same upstream through both), this one
answered more requests per second at a lower added latency; the numbers are in
docs/gateway.md. See it with:

    .venv/bin/python bench/gateway.py --aiohttp

Retries (docs/gateway.md): a request moves to another instance when the connection could
not be made (nothing was sent), when an instance answers with the shutting-down marker
(503 + X-Instance-Shutting-Down: true: it did not run it), or, for idempotent methods
only, when the connection broke after the request was sent and before any byte of an
answer. A request whose body was too large to keep for a second sending is not retried
once any of it went out.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from http import HTTPStatus

import httptools

from dataplane.gateway.headers import (
    GRAY_STATUS,
    HOP_BY_HOP,
    NOTHING,
    PLAIN_CONNECTION,
    SHUTTING_DOWN,
    connection_listed,
    strip_gray_baggage,
)
from dataplane.gateway.metrics import Metrics
from dataplane.gateway.routing import Instance, RoutingTable, Service
from dataplane.gateway.upstream import (
    BrokeBeforeAnswer,
    ConnectFailed,
    UpstreamConnection,
    UpstreamError,
    UpstreamPool,
)
from routing_engine import FLAGS, CallerResolver

log = logging.getLogger(__name__)

IDEMPOTENT = frozenset((b"GET", b"HEAD", b"OPTIONS", b"TRACE", b"PUT", b"DELETE"))
# Request bodies up to this size are kept until answered, so that they can be sent again
# to another instance; a longer one is streamed through and not retried once sent.
REPLAY_LIMIT = 1 << 20
# Body bytes waiting for an upstream connection before the client is asked to pause.
PENDING_LIMIT = 1 << 18
NO_VERSION = "none"
# Request headers the gateway drops, rewrites or reads before passing the rest on.
_HANDLED = HOP_BY_HOP | {
    b"content-length",
    b"x-forwarded-for",
    b"x-forwarded-proto",
    GRAY_STATUS,
    b"expect",
    b"baggage",
    b"host",
}
_FLAG_BYTES = {flag: flag.encode() for flag in FLAGS}
_REASONS = {status.value: status.phrase.encode() for status in HTTPStatus}


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


def _frame_chunk(data: bytes) -> bytes:
    return b"%x\r\n%b\r\n" % (len(data), data)


class _Retry(Exception):
    """The instance answered with the shutting-down marker."""


class Exchange:
    """One request, from its head to the end of its answer (the upstream Sink)."""

    __slots__ = (
        "client",
        "method",
        "url",
        "headers",
        "listed",
        "version",
        "keep_alive",
        "body_framing",
        "pending",
        "pending_size",
        "sent",
        "sent_size",
        "replayable",
        "body_done",
        "upstream",
        "attempting",
        "timer",
        "route",
        "candidates",
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
        "status",
        "failed",
    )

    def __init__(
        self, client: ClientConnection, url: bytes, headers: list, listed: frozenset, parser
    ) -> None:
        self.client = client
        self.method: bytes = parser.get_method()
        self.url = url
        self.headers: list[tuple[bytes, bytes]] = headers
        self.listed = listed  # what the Connection header declares hop-by-hop
        self.version: str = parser.get_http_version()
        self.keep_alive: bool = parser.should_keep_alive()
        # How the body goes upstream: b"" (none), b"length" or b"chunked" (re-chunked).
        self.body_framing = b""
        for name, _ in headers:
            if name == b"transfer-encoding":
                self.body_framing = b"chunked"
                break
            if name == b"content-length":
                self.body_framing = b"length"
        self.pending: list[bytes] = []  # framed body bytes not yet sent upstream
        self.pending_size = 0
        self.sent: list[bytes] = []  # framed body bytes sent, kept for a second sending
        self.sent_size = 0
        self.replayable = True
        self.body_done = False
        self.upstream: UpstreamConnection | None = None
        # The attempt in flight: sent to `instance`, waiting for the head of its answer.
        self.attempting = False
        self.timer: asyncio.TimerHandle | None = None
        self.route: Service | None = None
        self.candidates: list[Instance] = []
        self.head = b""
        self.tried: set[tuple[str, int]] = set()
        self.instance: Instance | None = None
        self.reused = False  # the attempt went out on a kept-alive connection
        self.stale_retried = False
        self.failure = (503, b"No instance of the service is available.")
        self.chunked_out = False
        # Answer bytes for the client, written at once when the instance's data is parsed
        # (the head and the first piece of the body in one send, not two).
        self.out: list[bytes] = []
        self.answered = False  # an answer head went to the client
        self.started = client.loop.time()
        self.service = ""
        self.metric_version = NO_VERSION
        self.status = 0
        self.failed = False

    # The request body, as the client sends it.
    def body(self, data: bytes) -> None:
        if not self.body_framing:
            return  # a request answered by the gateway itself: its body is read and dropped
        self._send(_frame_chunk(data) if self.body_framing == b"chunked" else data)

    def body_end(self) -> None:
        if self.body_framing == b"chunked":
            self._send(b"0\r\n\r\n")
        self.body_done = True

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
        self.sent_size += len(data)
        if self.sent_size > REPLAY_LIMIT:
            self.replayable = False
            self.sent = []
        else:
            self.sent.append(data)

    def can_send_again(self) -> bool:
        """Whether all of the body that went out is still at hand."""
        return self.replayable

    # Sink: the answer, as the instance sends it.
    def response_head(self, status, reason, headers, listed, length) -> None:
        if (
            status == 503
            and self.replayable
            and any(n == SHUTTING_DOWN and v.strip().lower() == b"true" for n, v in headers)
        ):
            self._detach()
            self._attempt_over(_Retry())
            return
        self._attempt_over(None)
        self.status = status
        lines = [b"HTTP/1.1 %d %b\r\n" % (status, reason or _REASONS.get(status, b"Unknown"))]
        for name, value in headers:
            if name in HOP_BY_HOP or name in listed or name[:6] == b"proxy-":
                continue
            lines += (name, b": ", value, b"\r\n")
        if length is None or length < 0:
            if self.version == "1.1":
                self.chunked_out = True
                lines.append(b"transfer-encoding: chunked\r\n")
            else:
                self.keep_alive = False  # an HTTP/1.0 client reads to the end of connection
        if not self.keep_alive:
            lines.append(b"connection: close\r\n")
        elif self.version == "1.0":
            lines.append(b"connection: keep-alive\r\n")
        lines.append(b"\r\n")
        self.answered = True
        self.out.append(b"".join(lines))

    def _attempt_over(self, error: BaseException | None) -> None:
        """The attempt got the head of an answer (None), or failed before it."""
        if not self.attempting:
            return
        self.attempting = False
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
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
        self.out.append(_frame_chunk(data) if self.chunked_out else data)

    def flush(self) -> None:
        out = self.out
        if out:
            self.client.write(out[0] if len(out) == 1 else b"".join(out))
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
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None


class ClientConnection(asyncio.Protocol):
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
        self._url = b""
        self._headers: list[tuple[bytes, bytes]] = []
        self._connection = False  # the request's Connection header names other headers
        self._idle_timer: asyncio.TimerHandle | None = None
        self._idle_since: float | None = None  # None: a request is being read or answered
        self._paused_by: set[int] = set()
        self._closing = False

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
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            # Upgrade is hop-by-hop and dropped: the request is answered as plain HTTP, and
            # nothing after it on this connection is read.
            self._closing = True
        except httptools.HttpParserError:
            if self.parsing is None and not self.queue:
                self._answer_and_close(400, b"A malformed HTTP request.")
            else:
                self._close()

    def connection_lost(self, exc) -> None:
        if self._idle_timer is not None:
            self._idle_timer.cancel()
            self._idle_timer = None
        for exchange in self.queue:
            exchange.abort()
        self.queue.clear()
        self.transport = None

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
        self._headers = []
        self._connection = False

    def on_url(self, url: bytes) -> None:
        self._url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        name = name.lower()
        self._headers.append((name, value))
        if name == b"connection" and value.lower() not in PLAIN_CONNECTION:
            self._connection = True

    def on_headers_complete(self) -> None:
        self._cancel_idle()
        listed = connection_listed(self._headers) if self._connection else NOTHING
        exchange = Exchange(self, self._url, self._headers, listed, self.parser)
        self.parsing = exchange
        self.queue.append(exchange)
        if len(self.queue) == 1:
            # Once the parser is done with this message (its body may follow in this data).
            self.loop.call_soon(self._serve, exchange)
        else:
            self.pause_reading_for(self.queue[0])  # pipelined: one at a time

    def on_body(self, body: bytes) -> None:
        if self.parsing is not None:
            self.parsing.body(body)

    def on_message_complete(self) -> None:
        if self.parsing is not None:
            self.parsing.body_end()
            self.parsing = None

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
        context = self.context
        path = exchange.url.partition(b"?")[0]
        if not path.startswith(b"/") or b"/../" in path + b"/" or b"/./" in path + b"/":
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
        exchange.head, flag = self._upstream_head(exchange, table, service)
        version, exchange.candidates = service.by_flag[flag]
        exchange.metric_version = version or NO_VERSION
        self._attempt(exchange)

    def _upstream_head(
        self, exchange: Exchange, table: RoutingTable, service: Service
    ) -> tuple[bytes, str]:
        """The request head for the instance, and the request's gray flag."""
        listed = exchange.listed
        decision_headers = table.decision_headers
        decide_on: dict[str, str] = {}
        forwarded_for = forwarded_proto = None
        lines = [exchange.method, b" ", exchange.url, b" HTTP/1.1\r\n"]
        has_host = False
        expect_continue = False
        # Most headers pass as they are; the few the gateway acts on are picked out by one
        # set lookup (this loop runs for every header of every request).
        for name, value in exchange.headers:
            if name in _HANDLED or name in listed or name[:6] == b"proxy-":
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
                if name == GRAY_STATUS:
                    continue
                if name == b"expect":
                    expect_continue = value.strip().lower() == b"100-continue"
                    continue
                if name == b"baggage":
                    value = strip_gray_baggage(value)
                    if not value:
                        continue
                elif name == b"host":
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
        trusted = self.peer_trusted
        chain = (forwarded_for + b", " if forwarded_for else b"") + self.peer_bytes
        proto = forwarded_proto if trusted and forwarded_proto else b"http"
        lines += (
            b"x-forwarded-for: ",
            chain,
            b"\r\nx-forwarded-proto: ",
            proto,
            b"\r\nx-gray-status: ",
            _FLAG_BYTES[decision.flag],
            b"\r\n" if has_host else b"\r\nhost: gateway\r\n",
            b"\r\n",
        )
        if expect_continue and exchange.version == "1.1" and not exchange.body_done:
            self.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        return b"".join(lines), decision.flag

    def _pick(self, service: Service, candidates: list[Instance], tried: set) -> Instance | None:
        pool = self.context.pool
        if not tried and not pool.has_ejections():
            return service.balancer.pick(candidates)  # type: ignore[return-value]
        fresh = [i for i in candidates if i.address not in tried]
        healthy = [i for i in fresh if not pool.is_ejected(i.address)]
        # With every one ejected, trying one beats refusing the request.
        return service.balancer.pick(healthy or fresh)  # type: ignore[return-value]

    def _attempt(self, exchange: Exchange) -> None:
        """Send the request to the next instance to try, or answer why there is none."""
        assert exchange.route is not None
        instance = self._pick(exchange.route, exchange.candidates, exchange.tried)
        if instance is None:
            self._answer(exchange, *exchange.failure)
            return
        exchange.tried.add(instance.address)
        exchange.instance = instance
        # A request sent again goes out on a new connection.
        upstream = None if exchange.stale_retried else self.context.pool.take_idle(instance.address)
        exchange.reused = upstream is not None
        if upstream is not None:
            self._send(exchange, upstream)
        else:
            self.loop.create_task(self._connect(exchange, instance))

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
                self._attempt(exchange)  # nothing was sent: any request may go elsewhere
            else:
                self._send(exchange, upstream)
        except Exception:
            log.exception("proxying %s failed", exchange.url.decode("latin-1"))
            self._broken(exchange)

    def _send(self, exchange: Exchange, upstream: UpstreamConnection) -> None:
        """Send the request (what arrived of its body so far; the rest follows as it comes)
        and wait, by callbacks, for the head of the answer."""
        assert exchange.instance is not None
        if exchange.sent:
            exchange.pending[:0] = exchange.sent
            exchange.sent, exchange.sent_size = [], 0
        upstream.begin(exchange, head_request=exchange.method == b"HEAD")
        exchange.upstream = upstream
        exchange.metric_version = exchange.instance.version
        exchange.attempting = True
        upstream.write(exchange.head)
        pending, exchange.pending, exchange.pending_size = exchange.pending, [], 0
        for data in pending:
            upstream.write(data)
            exchange._keep(data)
        self.resume_reading_for(exchange)
        exchange.timer = self.loop.call_later(self.context.request_timeout, exchange.time_out)

    def attempt_failed(self, exchange: Exchange, error: BaseException) -> None:
        """The attempt failed before any answer: try another instance when that cannot
        repeat work (docs/gateway.md, Retries), else answer why."""
        instance = exchange.instance
        assert instance is not None
        pool = self.context.pool
        retry = False
        if isinstance(error, _Retry):
            pool.eject(instance.address)
            exchange.failure = (503, b"Every instance tried is shutting down.")
            retry = exchange.can_send_again()
        elif isinstance(error, BrokeBeforeAnswer):
            log.info("%s at %s:%d: %s", instance.id, *instance.address, error)
            if exchange.reused and not exchange.stale_retried:
                # Likely a kept-alive connection the instance closed as the request went
                # out: the instance itself may be fine, and is tried once more.
                exchange.stale_retried = True
                exchange.tried.discard(instance.address)
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
            if retry:
                self._attempt(exchange)
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
        if exchange.service:
            latency_ms = (self.loop.time() - exchange.started) * 1000
            error = exchange.failed or exchange.status >= 500
            self.context.metrics.record(
                exchange.service, exchange.metric_version, error, latency_ms
            )
        if not exchange.body_done:
            exchange.keep_alive = False  # the rest of its body would be read as a request
        if self.queue and self.queue[0] is exchange:
            self.queue.popleft()
        if not exchange.keep_alive or self._closing:
            self._close()
            return
        if self.queue:
            self.loop.call_soon(self._serve, self.queue[0])
        else:
            self._arm_idle()
        self.resume_reading_for(exchange)

    def _answer_and_close(self, status: int, detail: bytes) -> None:
        body = b'{"detail": "%b"}' % detail
        self.write(
            b"HTTP/1.1 %d %b\r\ncontent-type: application/json\r\ncontent-length: %d\r\n"
            b"connection: close\r\n\r\n%b" % (status, _REASONS[status], len(body), body)
        )
        self._close()

    def _close(self) -> None:
        self._closing = True
        if self.transport is not None:
            self.transport.close()

    # The idle timeout: one timer per connection that re-arms itself, not a timer made and
    # cancelled for every request of a kept-alive connection.
    def _arm_idle(self) -> None:
        self._idle_since = self.loop.time()
        if self._idle_timer is None:
            self._idle_timer = self.loop.call_later(self.context.idle_timeout, self._check_idle)

    def _cancel_idle(self) -> None:
        self._idle_since = None

    def _check_idle(self) -> None:
        self._idle_timer = None
        if self.transport is None:
            return
        timeout = self.context.idle_timeout
        if self._idle_since is None:
            remaining = timeout
        else:
            remaining = self._idle_since + timeout - self.loop.time()
            if remaining <= 0:
                self._close()
                return
        self._idle_timer = self.loop.call_later(remaining, self._check_idle)
