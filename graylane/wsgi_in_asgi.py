"""Django's HTTP requests, served by the ASGI server through Django's WSGI handler: one hop to
a worker thread per request.

Every view and middleware here is synchronous. Django's ASGI handler runs each middleware's
request and response halves, the view and the request signals as separate hops between the
event loop and a thread started for the request: about fourteen hops per API request, most
of a small request's CPU (py-spy). Here the event loop reads the body, one pool thread runs
the whole request as a WSGI server would (signals included, so database connections are
closed or returned to the pool by the thread that used them), and the loop writes the
answer. A streaming response (a static file) is sent from its thread chunk by chunk.

Hand-written rather than the maintained a2wsgi.WSGIMiddleware (same thread count), which
hands every message of the answer (start, body, end) from the thread to the loop and back.
The benches that judge it, side by side with a2wsgi (figures and the latest verdict in
bench/README.md): the adapter alone and uvicorn under wrk,

    .venv/bin/python bench/wsgi_in_asgi.py   # a2wsgi: requirements-dev.txt

and end to end against the publish -> ack target (in-process; on PostgreSQL + Redis with
`--database postgres://.../NAME --redis redis://...`):

    .venv/bin/python bench/propagation.py --compare a2wsgi
"""

import asyncio
import sys
import tempfile
from collections.abc import Awaitable, Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import IO, Any

from django.conf import settings
from django.core.handlers.wsgi import WSGIHandler

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Coroutine[Any, Any, None]]


class WsgiInAsgi:
    """An ASGI app for HTTP that runs `wsgi_app` in a pool of `threads` threads."""

    def __init__(self, wsgi_app: WSGIHandler, threads: int):
        self.wsgi_app = wsgi_app
        self.executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="django")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # Spilled to disk when large, as Django's ASGI handler does.
        with tempfile.SpooledTemporaryFile(max_size=settings.FILE_UPLOAD_MAX_MEMORY_SIZE) as body:
            if not await _read_body(receive, body):
                return  # the client went away before it finished sending
            loop = asyncio.get_running_loop()
            answer = await loop.run_in_executor(
                self.executor, self._respond, loop, scope, body, send
            )
        if answer is not None:
            start, content = answer
            await send(start)
            await send({"type": "http.response.body", "body": content})

    def _respond(
        self, loop: asyncio.AbstractEventLoop, scope: Scope, body: IO[bytes], send: Send
    ) -> tuple[Message, bytes] | None:
        """In a pool thread: (start message, content) when the content is at hand; a
        streaming response is sent from here, and None returned."""
        started: list[Message] = []

        def start_response(
            status: str, headers: list[tuple[str, str]], exc_info: object = None
        ) -> None:
            # Django's Set-Cookie values start with a space (SimpleCookie's output).
            encoded = [
                (k.lower().encode("latin-1"), v.strip().encode("latin-1")) for k, v in headers
            ]
            started.append(
                {"type": "http.response.start", "status": int(status[:3]), "headers": encoded}
            )

        # PEP 3333's start_response returns a write(); Django's handler never calls one.
        response = self.wsgi_app(environ(scope, body), start_response)  # type: ignore[arg-type]
        try:
            if not getattr(response, "streaming", True):
                return started[-1], b"".join(response)

            def relay(message: Message) -> None:  # from this thread, at the client's pace
                asyncio.run_coroutine_threadsafe(send(message), loop).result()

            relay(started[-1])
            for chunk in response:
                if chunk:
                    relay({"type": "http.response.body", "body": chunk, "more_body": True})
            relay({"type": "http.response.body", "body": b""})
            return None
        finally:
            response.close()  # request_finished: in this thread


async def _read_body(receive: Receive, body: IO[bytes]) -> bool:
    """Reads the request body into the file `body`; False when the client disconnected."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return False
        body.write(message.get("body", b""))
        if not message.get("more_body", False):
            body.seek(0)
            return True


def environ(scope: Scope, body: IO[bytes]) -> dict[str, Any]:
    """The WSGI environ (PEP 3333) of an ASGI HTTP scope."""
    server = scope.get("server") or ("localhost", 80)
    result = {
        "REQUEST_METHOD": scope["method"],
        "SCRIPT_NAME": scope.get("root_path", "").encode().decode("latin-1"),
        "PATH_INFO": scope["path"].encode().decode("latin-1"),
        "QUERY_STRING": scope["query_string"].decode("latin-1"),
        "SERVER_NAME": str(server[0]),
        "SERVER_PORT": str(server[1] or 80),
        "SERVER_PROTOCOL": f"HTTP/{scope.get('http_version', '1.1')}",
        "wsgi.version": (1, 0),
        "wsgi.url_scheme": scope.get("scheme", "http"),
        "wsgi.input": body,
        "wsgi.errors": sys.stderr,
        "wsgi.multithread": True,
        "wsgi.multiprocess": True,
        "wsgi.run_once": False,
    }
    if scope.get("client"):
        result["REMOTE_ADDR"], result["REMOTE_PORT"] = scope["client"][0], str(scope["client"][1])
    for raw_name, raw_value in scope["headers"]:
        name = raw_name.decode("latin-1").upper().replace("-", "_")
        if name not in ("CONTENT_TYPE", "CONTENT_LENGTH"):
            name = f"HTTP_{name}"
        value = raw_value.decode("latin-1")
        if name in result:  # a repeated header: joined as Django's ASGI request does
            value = result[name] + ("; " if name == "HTTP_COOKIE" else ",") + value
        result[name] = value
    return result
