"""Middleware that puts each request's gray route (flag, lane, versions: flag.Route) in the
context variable for the time of the request (and only then): ASGI and WSGI. Django's is in
`django_middleware`.

Both reset the route when the request is over, so it cannot leak into the next request a
server thread or task handles; the WSGI one when the response is closed, since a WSGI body is
read after the app returns.
"""

from __future__ import annotations

import contextvars
from collections.abc import Awaitable, Callable, Iterable, Iterator
from typing import Any

from routing_engine.hops import LANE_HEADER, VERSIONS_HEADER

from .flag import BAGGAGE_HEADER, HEADER, Route, reset_route, route_from, set_route

Scope = dict[str, Any]
ASGIApp = Callable[[Scope, Callable[[], Awaitable[dict]], Callable[[dict], Awaitable[None]]], Any]

# The headers a route is read from, in route_from's order.
_NAMES = (HEADER, LANE_HEADER, VERSIONS_HEADER, BAGGAGE_HEADER)
_ASGI_NAMES = {name.lower().encode("latin-1"): at for at, name in enumerate(_NAMES)}
_WSGI_NAMES = ["HTTP_" + name.upper().replace("-", "_") for name in _NAMES]


def route_of_scope(scope: Scope) -> Route | None:
    values: list[bytes | None] = [None] * len(_NAMES)
    for name, value in scope.get("headers") or ():
        at = _ASGI_NAMES.get(name)
        if at is not None:
            values[at] = value
    return route_from(*values)


class GrayFlagASGIMiddleware:
    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive, send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        token = set_route(route_of_scope(scope))
        try:
            await self.app(scope, receive, send)
        finally:
            reset_route(token)


class GrayFlagWSGIMiddleware:
    def __init__(self, app: Callable[..., Iterable[bytes]]):
        self.app = app

    def __call__(self, environ: dict[str, Any], start_response) -> Iterable[bytes]:
        token = set_route(route_from(*(environ.get(name) for name in _WSGI_NAMES)))
        try:
            body = self.app(environ, start_response)
        except BaseException:
            reset_route(token)
            raise
        return _ClosingBody(body, token)


class _ClosingBody:
    """The app's body, iterated with the route set, which `close()` (PEP 3333: the server
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
            reset_route(self._token)
