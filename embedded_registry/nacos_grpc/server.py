"""The embedded registry's Nacos 2.x gRPC server: `Request.request` (unary) and
`BiRequestStream.requestBiStream`, on the port Nacos clients derive from the HTTP one
(+1000), or EMBEDDED_REGISTRY_GRPC_PORT.

It runs inside the web process (graylane/asgi.py starts it, docs/deploy.md says why): on
grpc.aio's event loop in a thread of its own, so an open stream costs no thread; each request
is answered in a small thread pool, as the ORM is synchronous. A bad payload is answered
with Nacos' error codes; nothing a client sends ends the server."""

import asyncio
import concurrent.futures
import contextlib
import logging
import threading
from collections.abc import AsyncIterator
from typing import Any

import grpc
from django.conf import settings
from django.db import close_old_connections

from embedded_registry import changes, naming
from embedded_registry.nacos_grpc import handlers, payloads
from embedded_registry.nacos_grpc.connections import Connection, Connections
from embedded_registry.naming import NamingError

log = logging.getLogger(__name__)

PORT_OFFSET = 1000  # Nacos clients' gRPC port: the server's HTTP port + 1000
THREADS = 8
MAX_WAITING_PUSHES = 100
HEALTH_CHECK_SECONDS = 1.0
OPTIONS = [
    # A port in use is an error, not shared with whoever holds it (grpc's default on Linux).
    ("grpc.so_reuseport", 0),
    # Find a client gone without a FIN (a host lost) within about a minute: its stream ends.
    ("grpc.keepalive_time_ms", 20_000),
    ("grpc.keepalive_timeout_ms", 20_000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.min_ping_interval_without_data_ms", 5_000),
]


def peer_ip(peer: str) -> str:
    """`ipv4:127.0.0.1:5000` / `ipv6:[::1]:5000` -> the address."""
    address = peer.partition(":")[2]
    host = address.rpartition(":")[0]
    return host.strip("[]") or address


class NacosGrpcServer:
    def __init__(self, host: str, port: int):
        self.host, self.port = host, port
        self.connections = Connections()
        self._pool = concurrent.futures.ThreadPoolExecutor(THREADS, "nacos-grpc")
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._failure: BaseException | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: Any = None

    # -- lifecycle --

    def start(self) -> None:
        threading.Thread(target=self._run, name="nacos-grpc", daemon=True).start()
        self._ready.wait(10)
        if self._failure is not None:
            raise self._failure
        changes.listen(self._changed)
        threading.Thread(target=self._renew_forever, name="nacos-grpc-beats", daemon=True).start()
        threading.Thread(target=self._watch_health, name="nacos-grpc-health", daemon=True).start()
        if settings.REDIS_URL:
            threading.Thread(
                target=changes.relay_from_redis, args=(self._stop,), name="nacos-grpc-relay",
                daemon=True,
            ).start()  # fmt: skip

    def stop(self) -> None:
        self._stop.set()
        changes.unlisten(self._changed)
        if self._loop is not None and self._server is not None:
            try:
                asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop).result(10)
            except TimeoutError:
                log.warning("The Nacos gRPC server took over 10 s to stop.")
        # The work of closed streams (deregistrations) finishes before stop() returns.
        self._pool.shutdown(wait=True)

    async def _shutdown(self) -> None:
        await self._server.stop(1)
        self._stopped.set()

    def _run(self) -> None:
        self._loop = asyncio.new_event_loop()
        try:
            self._loop.run_until_complete(self._serve())
        except BaseException as exc:  # the port is taken, say: start() reports it
            self._failure = exc
            self._ready.set()

    async def _serve(self) -> None:
        server = grpc.aio.server(options=OPTIONS)
        unary = grpc.unary_unary_rpc_method_handler(
            self._request, request_deserializer=payloads.parse,
            response_serializer=payloads.serialize,
        )  # fmt: skip
        stream = grpc.stream_stream_rpc_method_handler(
            self._bi_stream, request_deserializer=payloads.parse,
            response_serializer=payloads.serialize,
        )  # fmt: skip
        server.add_generic_rpc_handlers(
            (
                grpc.method_handlers_generic_handler("Request", {"request": unary}),
                grpc.method_handlers_generic_handler(
                    "BiRequestStream", {"requestBiStream": stream}
                ),
            )
        )
        if not server.add_insecure_port(f"{self.host}:{self.port}"):
            raise OSError(f"cannot listen on {self.host}:{self.port}")
        await server.start()
        self._server, self._stopped = server, asyncio.Event()
        self._ready.set()
        log.info("Nacos 2.x gRPC naming on %s:%s.", self.host, self.port)
        # Not server.wait_for_termination(): with it, server.stop() never returned here.
        await self._stopped.wait()

    def _renew_forever(self) -> None:
        while not self._stop.wait(naming.BEAT_INTERVAL_MS / 1000):
            close_old_connections()
            try:
                self.connections.renew()
            except Exception:
                log.exception("Renewing the gRPC clients' instances failed; retried next beat.")
            finally:
                close_old_connections()

    def _watch_health(self) -> None:
        """Push a subscribed service whose instances stopped beating (unhealthy after their
        beat timeout, 15 s) or beat again, as Nacos does: no row changes then, so no change
        is announced, and subscribers would see it only at the deletion (30 s). Every
        process watches for its own subscribers. (When a timed-out instance is deleted, its
        subscribers are pushed twice: by the deletion's announcement and by this.)"""
        before: dict[tuple[str, str, str], frozenset] = {}
        watched: set[tuple[str, str, str]] = set()  # a new subscriber was just answered
        while not self._stop.wait(HEALTH_CHECK_SECONDS):
            close_old_connections()
            try:
                subscribed = {
                    (key.namespace, key.group, key.service) for key in self.connections.subscribed()
                }
                now = naming.timed_out(subscribed)
                for service in subscribed & watched:
                    if now.get(service, frozenset()) != before.get(service, frozenset()):
                        self._changed(changes.ServiceKey(*service))
                before, watched = now, subscribed
            except Exception:
                log.exception("Watching the subscribed instances' beats failed; retried.")
            finally:
                close_old_connections()

    def _changed(self, service: changes.ServiceKey | None) -> None:
        self._pool.submit(self._push, service)

    def _push(self, service: changes.ServiceKey | None) -> None:
        try:
            self.connections.push(service, handlers.service_info)
        except Exception:
            log.exception("Pushing %s to its subscribers failed.", service)

    # -- the two RPCs --

    async def _request(self, payload: Any, context: grpc.aio.ServicerContext) -> Any:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, self.answer, payload, context.peer())

    def answer(self, payload: Any, peer: str) -> Any:
        """The response payload to a unary request; never raises."""
        request_id = ""
        try:
            kind, body, headers = payloads.decode(payload)
            request_id = str(body.get("requestId") or "")
            response_type, response = self._dispatch(kind, body, headers, peer)
        except payloads.BadPayload as exc:
            response_type, response = (
                "ErrorResponse",
                handlers.failed(handlers.BAD_GATEWAY, str(exc)),
            )
        except handlers.NacosError as exc:
            response_type = exc.response_type or "ErrorResponse"
            response = handlers.failed(exc.code, exc.message, request_id)
        except NamingError as exc:
            response_type = "ErrorResponse"
            response = handlers.failed(handlers.INVALID_PARAM, str(exc), request_id)
        except Exception as exc:
            log.exception("A Nacos gRPC request failed.")
            response_type = "ErrorResponse"
            response = handlers.failed(handlers.SERVER_ERROR, type(exc).__name__, request_id)
        return payloads.encode(response_type, response)

    def _dispatch(
        self, kind: str, body: dict, headers: dict[str, str], peer: str
    ) -> tuple[str, dict]:
        if kind == "ServerCheckRequest":
            # Nacos' connection id, which clients only log: this connection's peer.
            connection_id = peer.replace(":", "_")
            return "ServerCheckResponse", handlers.ok(
                str(body.get("requestId") or ""), connectionId=connection_id,
                supportAbilityNegotiation=False,
            )  # fmt: skip
        if kind == "HealthCheckRequest":
            return "HealthCheckResponse", handlers.ok(str(body.get("requestId") or ""))
        handler = handlers.HANDLERS.get(kind)
        if handler is None:
            raise handlers.NacosError(handlers.NO_HANDLER, "RequestHandler Not Found")
        connection = self.connections.of(peer)
        if connection is None:
            raise handlers.NacosError(handlers.UN_REGISTER, "Connection is unregistered.")
        close_old_connections()
        try:
            function, response_type = handler
            call = handlers.Call(kind, body, headers, peer_ip(peer), connection)
            return response_type, function(self.connections, call)
        finally:
            close_old_connections()

    async def _bi_stream(
        self, requests: AsyncIterator[Any], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[Any]:
        loop = asyncio.get_running_loop()
        outbox: asyncio.Queue[Any] = asyncio.Queue()
        peer = context.peer()
        connection: Connection | None = None

        def send(kind: str, body: dict) -> None:  # from any thread
            if outbox.qsize() >= MAX_WAITING_PUSHES:
                # A client that reads nothing must not grow this process; the next push
                # it does read carries the whole service anyway.
                log.warning("Dropped a push to %s: %d wait already.", peer, MAX_WAITING_PUSHES)
                return
            with contextlib.suppress(RuntimeError):  # the server's loop has closed
                loop.call_soon_threadsafe(outbox.put_nowait, payloads.encode(kind, body))

        async def read() -> None:
            nonlocal connection
            try:
                async for payload in requests:
                    try:
                        kind, body, _ = payloads.decode(payload)
                    except payloads.BadPayload as exc:
                        log.info("Ignored a bad payload on the stream of %s: %s", peer, exc)
                        continue
                    # The rest on the stream are clients' acks (NotifySubscriberResponse).
                    if kind == "ConnectionSetupRequest" and connection is None:
                        connection = Connection(
                            id=peer.replace(":", "_"), peer=peer, client_ip=peer_ip(peer), send=send
                        )
                        self.connections.open(connection)
            finally:
                outbox.put_nowait(None)

        reader = asyncio.ensure_future(read())
        try:
            while (item := await outbox.get()) is not None:
                yield item
        finally:
            reader.cancel()
            if connection is not None:
                # Not awaited: a cancelled stream's cleanup must not be cancelled with it.
                loop.run_in_executor(self._pool, self._close, connection)

    def _close(self, connection: Connection) -> None:
        close_old_connections()
        try:
            self.connections.close(connection)
        finally:
            close_old_connections()


_lock = threading.Lock()
_started = False


def start_beside(http_host: str, http_port: int | None) -> NacosGrpcServer | None:
    """Start this process's server, once, for the HTTP server at (host, port); None when it
    cannot listen (logged once: the HTTP API still serves)."""
    global _started
    with _lock:
        if _started:
            return None
        _started = True
    port = settings.EMBEDDED_REGISTRY_GRPC_PORT or (http_port or 0) and http_port + PORT_OFFSET
    if not port:  # a Unix socket: no port to derive from
        log.error("No Nacos 2.x gRPC naming: set EMBEDDED_REGISTRY_GRPC_PORT.")
        return None
    server = NacosGrpcServer(http_host, port)
    try:
        server.start()
    except Exception as exc:
        log.error("The Nacos 2.x gRPC naming server cannot start on port %s: %s", port, exc)
        server.stop()
        return None
    return server


class WithNacosGrpc:
    """ASGI middleware: the first request tells the HTTP server's address (`scope["server"]`,
    which the lifespan scope lacks), and the gRPC server starts beside it, before that
    request is answered: a readiness probe that passed means gRPC listens too."""

    def __init__(self, app: Any):
        self.app = app
        self._pending = True

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if self._pending and scope.get("type") in ("http", "websocket") and scope.get("server"):
            self._pending = False
            host, port = scope["server"][:2]
            await asyncio.get_running_loop().run_in_executor(None, start_beside, host, port)
        await self.app(scope, receive, send)
