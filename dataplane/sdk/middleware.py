"""Middleware that puts each request's gray flag in the context variable for the time of the
request (and only then): ASGI and WSGI. Django's is in `django_middleware`.

Both reset the flag when the request is over, so it cannot leak into the next request a
server thread or task handles; the WSGI one when the response is closed, since a WSGI body is
read after the app returns.
"""

from __future__ import annotations

import contextvars
from collections.abc import Awaitable, Callable, Iterable, Iterator
from typing import Any

from .flag import BAGGAGE_HEADER, HEADER, flag_from_baggage, parse_flag, reset_flag, set_flag

Scope = dict[str, Any]
ASGIApp = Callable[[Scope, Callable[[], Awaitable[dict]], Callable[[dict], Awaitable[None]]], Any]

_FLAG = HEADER.lower().encode("latin-1")
_BAGGAGE = BAGGAGE_HEADER.encode("latin-1")
_WSGI_FLAG = "HTTP_" + HEADER.upper().replace("-", "_")
_WSGI_BAGGAGE = "HTTP_" + BAGGAGE_HEADER.upper()


def flag_of_scope(scope: Scope) -> str | None:
    flag = baggage = None
    for name, value in scope.get("headers") or ():
        if name == _FLAG:
            flag = value
        elif name == _BAGGAGE:
            baggage = value
    return parse_flag(flag) or flag_from_baggage(baggage)


class GrayFlagASGIMiddleware:
    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive, send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        token = set_flag(flag_of_scope(scope))
        try:
            await self.app(scope, receive, send)
        finally:
            reset_flag(token)


class GrayFlagWSGIMiddleware:
    def __init__(self, app: Callable[..., Iterable[bytes]]):
        self.app = app

    def __call__(self, environ: dict[str, Any], start_response) -> Iterable[bytes]:
        flag = parse_flag(environ.get(_WSGI_FLAG)) or flag_from_baggage(environ.get(_WSGI_BAGGAGE))
        token = set_flag(flag)
        try:
            body = self.app(environ, start_response)
        except BaseException:
            reset_flag(token)
            raise
        return _ClosingBody(body, token)


class _ClosingBody:
    """The app's body, iterated with the flag set, which `close()` (PEP 3333: the server
    always calls it) resets."""

    def __init__(self, body: Iterable[bytes], token: contextvars.Token):
        self._body = body
        self._token = token

    def __iter__(self) -> Iterator[bytes]:
        return iter(self._body)

    def close(self) -> None:
        try:
            close = getattr(self._body, "close", None)
            if close is not None:
                close()
        finally:
            reset_flag(self._token)
