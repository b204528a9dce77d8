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
    SHUTTING_DOWN,
    connection_listed,
    is_hop_by_hop,
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
from routing_engine import CallerResolver

log = logging.getLogger(__name__)

IDEMPOTENT = frozenset((b"GET", b"HEAD", b"OPTIONS", b"TRACE", b"PUT", b"DELETE"))
# Request bodies up to this size are kept until answered, so that they can be sent again
# to another instance; a longer one is streamed through and not retried once sent.
REPLAY_LIMIT = 1 << 20
# Body bytes waiting for an upstream connection before the client is asked to pause.
PENDING_LIMIT = 1 << 18
NO_VERSION = "none"
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
        "head_waiter",
        "chunked_out",
        "out",
        "answered",
        "started",
        "service",
        "metric_version",
        "status",
        "failed",
    )

    def __init__(self, client: ClientConnection, url: bytes, headers: list, parser) -> None:
        self.client = client
        self.method: bytes = parser.get_method()
        self.url = url
        self.headers: list[tuple[bytes, bytes]] = headers
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
        self.head_waiter: asyncio.Future | None = None
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
    def response_head(self, status, reason, headers, length) -> None:
        waiter = self.head_waiter
        if (
            status == 503
            and self.replayable
            and any(n == SHUTTING_DOWN and v.strip().lower() == b"true" for n, v in headers)
        ):
            if waiter is not None and not waiter.done():
                waiter.set_exception(_Retry())
            upstream = self.upstream
            self.upstream = None
            if upstream is not None:
                upstream.sink = None
                upstream.close()
            return
        self.status = status
        listed = connection_listed(headers)
        lines = [b"HTTP/1.1 %d %b\r\n" % (status, reason or _REASONS.get(status, b"Unknown"))]
        for name, value in headers:
            if not is_hop_by_hop(name, listed):
                lines.append(b"%b: %b\r\n" % (name, value))
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
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

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
        waiter = self.head_waiter
        if waiter is not None and not waiter.done():
            waiter.set_exception(error)
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
        upstream, self.upstream = self.upstream, None
        if upstream is not None:
            upstream.sink = None
            upstream.close()
        waiter = self.head_waiter
        if waiter is not None and not waiter.done():
            waiter.cancel()


class ClientConnection(asyncio.Protocol):
    def __init__(self, context: Context):
        self.context = context
        self.loop = asyncio.get_running_loop()
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpRequestParser(self)
        self.peer = ""
        self.queue: deque[Exchange] = deque()  # the first is being answered
        self.parsing: Exchange | None = None
        self._url = b""
        self._headers: list[tuple[bytes, bytes]] = []
        self._idle_timer: asyncio.TimerHandle | None = None
        self._paused_by: set[int] = set()
        self._closing = False

    # asyncio.Protocol
    def connection_made(self, transport) -> None:
        self.transport = transport
        peer = transport.get_extra_info("peername")
        self.peer = peer[0] if peer else ""
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
        self._cancel_idle()
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

    def on_url(self, url: bytes) -> None:
        self._url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        self._headers.append((name.lower(), value))

    def on_headers_complete(self) -> None:
        self._cancel_idle()
        exchange = Exchange(self, self._url, self._headers, self.parser)
        self.parsing = exchange
        self.queue.append(exchange)
        if len(self.queue) == 1:
            self.loop.create_task(self._serve(exchange))
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
        self._paused_by.discard(id(exchange))
        if not self._paused_by and self.transport is not None and not self._closing:
            self.transport.resume_reading()

    def write(self, data: bytes) -> None:
        if self.transport is not None:
            self.transport.write(data)

    # answering
    async def _serve(self, exchange: Exchange) -> None:
        try:
            await self._route(exchange)
        except Exception:
            log.exception("proxying %s failed", exchange.url.decode("latin-1"))
            if not exchange.answered:
                self._answer(exchange, 500, b"The gateway failed.")
            else:
                exchange.keep_alive = False
                self.finished(exchange)

    async def _route(self, exchange: Exchange) -> None:
        context = self.context
        url = exchange.url
        path = url.partition(b"?")[0]
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
        head, flag = self._upstream_head(exchange, table, service)
        version, candidates = service.by_flag[flag]
        exchange.metric_version = version or NO_VERSION
        await self._relay(exchange, service, candidates, head)

    def _upstream_head(
        self, exchange: Exchange, table: RoutingTable, service: Service
    ) -> tuple[bytes, str]:
        """The request head for the instance, and the request's gray flag."""
        headers = exchange.headers
        listed = connection_listed(headers)
        decide_on: dict[str, str] = {}
        forwarded_for = forwarded_proto = None
        lines = [b"%b %b HTTP/1.1\r\n" % (exchange.method, exchange.url)]
        has_host = False
        expect_continue = False
        for name, value in headers:
            if is_hop_by_hop(name, listed):
                continue
            if name == b"content-length":
                if exchange.body_framing == b"length":
                    lines.append(b"content-length: %b\r\n" % value)
                continue
            if name == b"x-forwarded-for":
                forwarded_for = value if forwarded_for is None else forwarded_for + b", " + value
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
            decide_on[name.decode("latin-1")] = value.decode("latin-1")
            lines.append(b"%b: %b\r\n" % (name, value))
        if exchange.body_framing == b"chunked":
            lines.append(b"transfer-encoding: chunked\r\n")
        peer = self.peer
        resolver = self.context.resolver
        client_ip, city = resolver.resolve(
            peer,
            forwarded_for.decode("latin-1") if forwarded_for is not None else None,
            decide_on.get(table.city_header),
        )
        decide = service.decide or table.matcher.decide
        decision = decide(decide_on, ip=client_ip, city=city or "")
        trusted = resolver.trusted and resolver.is_trusted(peer)
        chain = (forwarded_for + b", " if forwarded_for else b"") + peer.encode()
        lines.append(b"x-forwarded-for: %b\r\n" % chain)
        proto = forwarded_proto if trusted and forwarded_proto else b"http"
        lines.append(b"x-forwarded-proto: %b\r\n" % proto)
        lines.append(b"x-gray-status: %b\r\n" % decision.flag.encode())
        if not has_host:
            lines.append(b"host: gateway\r\n")
        lines.append(b"\r\n")
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

    async def _relay(self, exchange, service: Service, candidates, head: bytes) -> None:
        context = self.context
        tried: set[tuple[str, int]] = set()
        failure = (503, b"No instance of the service is available.")
        while True:
            instance = self._pick(service, candidates, tried)
            if instance is None:
                break
            tried.add(instance.address)
            try:
                upstream, _ = await context.pool.acquire(instance.address)
            except ConnectFailed as exc:
                log.info("%s: %s", service.name, exc)
                failure = (502, b"No instance of the service could be reached.")
                continue  # nothing was sent: any request may go elsewhere
            if self.transport is None:  # the client went away meanwhile
                context.pool.release(upstream)
                return
            exchange.metric_version = instance.version
            try:
                await self._exchange(exchange, upstream, head)
                return  # the head went to the client; callbacks carry the rest
            except _Retry:
                context.pool.eject(instance.address)
                failure = (503, b"Every instance tried is shutting down.")
                if exchange.can_send_again():
                    continue
                break
            except BrokeBeforeAnswer as exc:
                log.info("%s at %s:%d: %s", service.name, *instance.address, exc)
                context.pool.connect_failed(instance.address)
                failure = (502, b"The instance closed the connection without answering.")
                if exchange.method in IDEMPOTENT and exchange.can_send_again():
                    continue
                break
            except UpstreamError as exc:
                log.info("%s at %s:%d: %s", service.name, *instance.address, exc)
                failure = (502, b"The instance sent an unreadable answer.")
                break
            except TimeoutError:
                failure = (504, b"The instance did not answer in time.")
                break
            except asyncio.CancelledError:
                return  # the client went away
        self._answer(exchange, *failure)

    async def _exchange(self, exchange: Exchange, upstream: UpstreamConnection, head: bytes):
        """Send the request (what arrived of its body so far, the rest as it comes) and wait
        for the head of the answer."""
        if exchange.sent:
            exchange.pending[:0] = exchange.sent
            exchange.sent, exchange.sent_size = [], 0
        upstream.begin(exchange, head_request=exchange.method == b"HEAD")
        exchange.upstream = upstream
        waiter = exchange.head_waiter = self.loop.create_future()
        upstream.write(head)
        pending, exchange.pending, exchange.pending_size = exchange.pending, [], 0
        for data in pending:
            upstream.write(data)
            exchange._keep(data)
        self.resume_reading_for(exchange)
        timer = self.loop.call_later(self.context.request_timeout, _time_out, waiter)
        try:
            await waiter
        except (TimeoutError, asyncio.CancelledError):
            exchange.abort()
            raise
        finally:
            timer.cancel()
            exchange.head_waiter = None

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
        self._paused_by.discard(id(exchange))
        if not exchange.keep_alive or self._closing:
            self._close()
            return
        if self.queue:
            self.loop.create_task(self._serve(self.queue[0]))
        else:
            self._arm_idle()
        if not self._paused_by and self.transport is not None:
            self.transport.resume_reading()

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

    def _arm_idle(self) -> None:
        self._cancel_idle()
        self._idle_timer = self.loop.call_later(self.context.idle_timeout, self._close)

    def _cancel_idle(self) -> None:
        if self._idle_timer is not None:
            self._idle_timer.cancel()
            self._idle_timer = None


def _time_out(waiter: asyncio.Future) -> None:
    if not waiter.done():
        waiter.set_exception(TimeoutError())
