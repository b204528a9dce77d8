"""Outgoing `httpx` calls send the request's gray route on (flag, lane, versions: the
reference design's Feign interceptor), through event hooks:

    httpx.Client(event_hooks=httpx_hooks())
    httpx.AsyncClient(event_hooks=httpx_async_hooks())

Hooks rather than a wrapping transport: they keep the client's own transport (pool limits,
HTTP/2, proxies) untouched, and httpx runs them in the caller's task, so they see its route.
"""

from __future__ import annotations

from typing import Any

import httpx

from .flag import outgoing_headers


def _add_flag(request: httpx.Request) -> None:
    request.headers.update(outgoing_headers(request.headers))


async def _add_flag_async(request: httpx.Request) -> None:
    _add_flag(request)


def httpx_hooks() -> dict[str, list[Any]]:
    """`event_hooks` for an `httpx.Client`."""
    return {"request": [_add_flag]}


def httpx_async_hooks() -> dict[str, list[Any]]:
    """`event_hooks` for an `httpx.AsyncClient` (its hooks must be coroutines)."""
    return {"request": [_add_flag_async]}
