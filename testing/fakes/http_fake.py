"""Shared plumbing of the contract fakes (test code; not Nacos, not Eureka): a real HTTP
server on 127.0.0.1.

A fake subclasses :class:`FakeHTTPServer` and implements :meth:`FakeHTTPServer.handle`. This
module owns everything else: the server thread, the free port, request parsing (query + form),
JSON/text replies, the request log, and the outage switches ``fail_with`` and ``delay``.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import traceback
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

HTTP_REASONS = {
    200: "OK",
    204: "No Content",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    409: "Conflict",
    410: "Gone",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
}


@dataclass
class FakeRequest:
    method: str
    path: str  # URL path, percent-decoded, including the context path (e.g. /nacos/v1/ns/...)
    params: dict[str, str]  # query string and url-encoded form body, merged (body wins)
    headers: dict[str, str]  # lower-cased names
    body: bytes = b""

    def header(self, name: str, default: str = "") -> str:
        return self.headers.get(name.lower(), default)

    def json(self) -> Any:
        return json.loads(self.body or b"null")


@dataclass
class FakeResponse:
    status: int = 200
    body: bytes = b""
    content_type: str = "text/plain;charset=UTF-8"
    headers: dict[str, str] = field(default_factory=dict)
    # A body sent as it is produced (HTTP/1.1 chunked), read outside the fake's lock: a
    # Kubernetes watch. ``body`` is then unused.
    chunks: Iterator[bytes] | None = None


def json_reply(payload: Any, status: int = 200, headers: dict[str, str] | None = None):
    return FakeResponse(
        status,
        json.dumps(payload).encode(),
        "application/json",
        dict(headers or {}),
    )


def text_reply(text: str, status: int = 200, content_type: str = "text/plain;charset=UTF-8"):
    return FakeResponse(status, text.encode(), content_type)


def empty_reply(status: int = 200) -> FakeResponse:
    return FakeResponse(status, b"", "")


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False  # do not wait for handlers stuck in a simulated delay
    fake: FakeHTTPServer

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.open_connections: set[socket.socket] = set()
        self.accepted = 0  # connections accepted so far
        self.connections_lock = threading.Lock()

    def process_request(self, request: Any, client_address: Any) -> None:
        with self.connections_lock:
            self.open_connections.add(request)
            self.accepted += 1
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self.connections_lock:
            self.open_connections.discard(request)
        super().shutdown_request(request)

    def close_connections(self) -> None:
        """Hang up on every client, as a server process that exits does: a kept-alive
        connection must not outlive the server and reach a stopped fake."""
        with self.connections_lock:
            connections, self.open_connections = self.open_connections, set()
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that timed out and hung up is expected (timeout tests); stay quiet.
        pass


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body are two writes: avoid 40 ms ACK stalls
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass

    def _dispatch(self) -> None:
        fake = self.server.fake
        if fake._stopping.is_set():  # stopped: hang up on kept-alive connections too
            self.close_connection = True
            return
        split = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        params = dict(parse_qsl(split.query, keep_blank_values=True))
        content_type = self.headers.get("Content-Type", "")
        if body and content_type.startswith("application/x-www-form-urlencoded"):
            params.update(parse_qsl(body.decode(), keep_blank_values=True))
        request = FakeRequest(
            method=self.command,
            path=unquote(split.path),
            params=params,
            headers={key.lower(): value for key, value in self.headers.items()},
            body=body,
        )
        response = fake._serve(request)
        if response is None:  # server stopped during a delay
            self.close_connection = True
            return
        self.send_response(response.status, HTTP_REASONS.get(response.status))
        if response.content_type:
            self.send_header("Content-Type", response.content_type)
        for name, value in response.headers.items():
            self.send_header(name, value)
        if response.chunks is not None:
            self._send_chunked(response.chunks)
            return
        self.send_header("Content-Length", str(len(response.body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(response.body)

    def _send_chunked(self, chunks: Iterator[bytes]) -> None:
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            for chunk in chunks:
                if chunk:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                    self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
        except OSError:  # the client hung up mid-stream
            self.close_connection = True

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = _dispatch


class FakeHTTPServer:
    """Base of the contract fakes: start/stop, ``url``, ``requests_log``, outage switches.

    Use as a context manager (``with FakeNacos() as nacos: ...``) or call start()/stop().
    Subclasses set ``context_path`` and implement :meth:`handle`; it runs under ``self.lock``.
    """

    context_path = ""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.requests_log: list[tuple[str, str, dict[str, str]]] = []
        self.headers_log: list[dict[str, str]] = []
        self._fail: tuple[int, FakeResponse] | None = None
        self._delay = 0.0
        self._stopping = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle --------------------------------------------------------------------------

    def start(self) -> FakeHTTPServer:
        if self._server is not None:
            return self
        self._stopping.clear()
        server = _Server(("127.0.0.1", 0), _Handler)
        server.fake = self
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": 0.01},
            name=f"{type(self).__name__}-{server.server_address[1]}",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        self._stopping.set()  # wake handlers sleeping in a simulated delay
        server.shutdown()
        server.server_close()
        server.close_connections()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError(f"{type(self).__name__} is not running")
        return self._server.server_address[1]

    @property
    def root_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return self.root_url + self.context_path

    # -- outage switches --------------------------------------------------------------------

    def fail_with(self, status: int | None, body: str = "fake outage", *, json_body: Any = None):
        """Answer every request with ``status`` (and ``body`` or ``json_body``) until
        ``fail_with(None)``. ``fail_with(200, json_body=...)`` serves an arbitrary answer."""
        with self.lock:
            if status is None:
                self._fail = None
            elif json_body is not None:
                self._fail = (status, json_reply(json_body, status))
            else:
                self._fail = (status, text_reply(body, status))

    def delay(self, seconds: float) -> None:
        """Wait ``seconds`` before answering each request (0 to stop)."""
        with self.lock:
            self._delay = max(0.0, seconds)

    def clear_log(self) -> None:
        with self.lock:
            self.requests_log.clear()
            self.headers_log.clear()

    @property
    def connections_accepted(self) -> int:
        """How many connections clients opened to this fake (since it started)."""
        return self._server.accepted if self._server is not None else 0

    def requests_to(self, path_suffix: str, method: str | None = None) -> list[dict[str, str]]:
        """Params of the logged requests whose path ends with ``path_suffix``."""
        with self.lock:
            return [
                params
                for logged_method, path, params in self.requests_log
                if path.endswith(path_suffix) and (method is None or logged_method == method)
            ]

    # -- serving ----------------------------------------------------------------------------

    def _serve(self, request: FakeRequest) -> FakeResponse | None:
        with self.lock:
            self.requests_log.append((request.method, request.path, dict(request.params)))
            self.headers_log.append(dict(request.headers))
            delay, fail = self._delay, self._fail
        if delay and self._stopping.wait(delay):
            return None
        if fail is not None:
            return fail[1]
        try:
            with self.lock:
                return self.handle(request)
        except Exception:  # a bug in the fake: surface it as a 500 the test will notice
            return text_reply("fake server error:\n" + traceback.format_exc(), 500)

    def handle(self, request: FakeRequest) -> FakeResponse:
        raise NotImplementedError
