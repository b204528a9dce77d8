"""Push mode: POST the document to the gateway, signed (gateways/signing.py). The gateway
answers 2xx `{"generation": N}` with the generation it runs; it must never go back to a
lower generation than the one it runs, so of two deliveries crossing on the wire the older
one is refused and answered with the newer number.

A new generation is pushed to every push gateway at once (gateways.delivery), by one thread
running an event loop of its own: its POSTs leave in one go on kept-alive connections and
their answers are read as they come, parsed by httptools (the C parser uvicorn uses).

Hand-written rather than over aiohttp's ClientSession (kept-alive connector, same loop).
The benches that judge it, side by side with aiohttp (figures and the latest verdict in
bench/README.md): one push to 50 loopback gateways a round,

    .venv/bin/python bench/push_client.py   # aiohttp: requirements-dev.txt

and end to end against the publish -> ack target (in-process; on PostgreSQL + Redis with
`--database postgres://.../NAME --redis redis://...`):

    .venv/bin/python bench/propagation.py --compare aiohttp
"""

import asyncio
import json
import os
import select
import ssl
import threading
from urllib.parse import urlsplit

import httptools
import uvloop
from django.conf import settings

from gateways import signing
from gateways.errors import DeliveryError
from gateways.generation import Snapshot
from gateways.models import Gateway
from outbound.answers import excerpt

_TLS = ssl.create_default_context()


class ProtocolError(Exception):
    """The gateway's answer was not HTTP/1.1 we could read."""


class RemoteDisconnected(ConnectionError):
    """The gateway closed the connection before answering: on a kept-alive connection, before
    the request reached it."""


class _Connection(asyncio.Protocol):
    """One HTTP/1.1 connection to a gateway, one request at a time."""

    transport: asyncio.Transport  # from connection_made, before any request

    def __init__(self):
        self._answer: asyncio.Future | None = None  # the request in flight, if any

    def connection_made(self, transport) -> None:
        self.transport = transport

    def request(self, data: bytes) -> asyncio.Future:
        """Sends `data`; the future gets (status, body, whether the connection may be used
        again)."""
        self._answer = asyncio.get_running_loop().create_future()
        self._received = self._headers_done = self._complete = self._delimited = False
        self._body: list[bytes] = []
        self._parser = httptools.HttpResponseParser(self)
        self.transport.write(data)
        return self._answer

    def is_idle_and_open(self) -> bool:
        if self.transport.is_closing():
            return False
        # Readable (or hung up) while idle means the gateway closed it (or sent what nobody
        # asked for); the loop learns of it only when it runs, so ask the socket. poll(), not
        # select(): select() refuses descriptors from 1024 up.
        poller = select.poll()
        poller.register(self.transport.get_extra_info("socket").fileno(), select.POLLIN)
        return not poller.poll(0)

    def close(self) -> None:
        self.transport.close()

    # asyncio.Protocol
    def data_received(self, data: bytes) -> None:
        self._received = True
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(ProtocolError(f"unreadable HTTP answer: {exc}"))
            return
        if self._complete:
            self._resolve(self._keep_alive)

    def eof_received(self) -> None:
        self._ended(None)

    def connection_lost(self, exc: Exception | None) -> None:
        self._ended(exc)

    # httptools callbacks
    def on_header(self, name: bytes, value: bytes) -> None:
        if name.lower() in (b"content-length", b"transfer-encoding"):
            self._delimited = True

    def on_headers_complete(self) -> None:
        self._headers_done = True
        # Only known while the message is being parsed (httptools resets it after).
        self._keep_alive = self._parser.should_keep_alive()

    def on_body(self, body: bytes) -> None:
        self._body.append(body)

    def on_message_complete(self) -> None:
        self._complete = True

    def _ended(self, exc: Exception | None) -> None:
        if self._answer is None or self._answer.done():
            return
        if self._headers_done and not self._delimited:
            self._resolve(False)  # a body that ends with the connection
        elif not self._received:
            self._fail(exc or RemoteDisconnected("the gateway closed the connection unanswered"))
        else:
            self._fail(ProtocolError("the gateway closed the connection mid-answer"))

    def _resolve(self, reusable: bool) -> None:
        if self._answer is not None and not self._answer.done():
            self._answer.set_result(
                (self._parser.get_status_code(), b"".join(self._body), reusable)
            )

    def _fail(self, exc: Exception) -> None:
        self.transport.close()
        if self._answer is not None and not self._answer.done():
            self._answer.set_exception(exc)


class ConnectionPool:
    """Idle keep-alive connections per (scheme, host, port), for one event loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop):
        self.loop = loop
        self._idle: dict[tuple[str, str, int], list[_Connection]] = {}

    async def post(self, url: str, body: bytes, headers: dict[str, str], timeout: float):
        """(status, body) of POST `url`; raises OSError, TimeoutError or ProtocolError."""
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {url!r}")
        origin = (
            parts.scheme,
            parts.hostname,
            parts.port or (443 if parts.scheme == "https" else 80),
        )
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        head = [f"POST {target} HTTP/1.1", f"Host: {parts.netloc}", f"Content-Length: {len(body)}"]
        head += [f"{name}: {value}" for name, value in headers.items()]
        request = ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body
        async with asyncio.timeout(timeout):
            connection = self._take(origin)
            if connection is not None:
                try:
                    return await self._exchange(origin, connection, request)
                except RemoteDisconnected:
                    pass  # it did not reach the gateway: sent once more, on a new connection
            return await self._exchange(origin, await self._connect(origin), request)

    async def _connect(self, origin) -> _Connection:
        scheme, host, port = origin
        tls = {"ssl": _TLS, "server_hostname": host} if scheme == "https" else {}
        _, connection = await self.loop.create_connection(_Connection, host, port, **tls)
        return connection

    async def _exchange(self, origin, connection: _Connection, request: bytes):
        try:
            status, answer, reusable = await connection.request(request)
        except BaseException:
            connection.close()  # an unfinished exchange leaves it unusable
            raise
        if reusable:
            self._idle.setdefault(origin, []).append(connection)
        else:
            connection.close()
        return status, answer

    def _take(self, origin) -> _Connection | None:
        idle = self._idle.get(origin, [])
        while idle:
            connection = idle.pop()
            if connection.is_idle_and_open():
                return connection
            connection.close()
        return None


_local = threading.local()


def event_loop() -> asyncio.AbstractEventLoop:
    """This thread's event loop for pushes, with its pool of connections (kept across
    deliveries: run it with `run_until_complete`)."""
    if getattr(_local, "pid", None) != os.getpid():  # new, or a forked child's inherited one
        _local.loop, _local.pid = uvloop.new_event_loop(), os.getpid()
        _local.pool = ConnectionPool(_local.loop)
    return _local.loop


def signed_headers(gateway: Gateway, snapshot: Snapshot) -> dict[str, str]:
    """The headers of a push of `snapshot`: its signature, and for whom and which it is (also
    what bench/stock.py's aiohttp client sends)."""
    return {
        "Content-Type": "application/json",
        signing.HEADER: signing.sign(gateway.push_secret, snapshot.body),
        "X-Graylane-Gateway": gateway.name,
        "X-Graylane-Generation": str(snapshot.number),
    }


async def push(gateway: Gateway, snapshot: Snapshot) -> int:
    """Send `snapshot`, on this thread's `event_loop()`; returns the generation the gateway
    says it runs."""
    headers = signed_headers(gateway, snapshot)
    try:
        status, answer = await _local.pool.post(
            gateway.endpoint, snapshot.body, headers, settings.GATEWAY_PUSH_TIMEOUT
        )
    except TimeoutError as exc:
        timeout = settings.GATEWAY_PUSH_TIMEOUT
        raise DeliveryError(f"POST {gateway.endpoint}: no answer within {timeout:g} s") from exc
    except (OSError, ProtocolError, ValueError) as exc:
        raise DeliveryError(f"POST {gateway.endpoint}: {_reason(exc)}") from exc
    text = answer.decode("utf-8", errors="replace")
    if not 200 <= status < 300:
        raise DeliveryError(f"POST {gateway.endpoint} -> HTTP {status}: {excerpt(text)}")
    try:
        applied = json.loads(answer)["generation"]
    except (ValueError, KeyError, TypeError):
        applied = None
    if not isinstance(applied, int) or isinstance(applied, bool):
        raise DeliveryError(
            f"POST {gateway.endpoint} answered without the generation it applied: {excerpt(text)}"
        )
    return applied


def _reason(exc: Exception) -> str:
    if isinstance(exc, OSError) and exc.errno and exc.errno > 0:
        return os.strerror(exc.errno)  # "Connection refused" rather than asyncio's wording
    return f"{type(exc).__name__}: {exc}"
