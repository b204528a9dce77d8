"""Serving the gateway endpoints (protocol/endpoints.py) straight from ASGI.

Django's ASGI handler costs more per request than the endpoints' own work (building the
request, signals, middleware, a thread-sensitive context per request; with a sync-only
middleware in the chain a thread even blocks for the whole of a long poll). A new
generation brings every gateway back at once, so here the two endpoints take the path,
method, Authorization header, query and body from the ASGI scope and answer directly.
Every other request goes to Django as before.

What Django's middleware does for every request is done here too, the same way: the Host
header is checked against ALLOWED_HOSTS (400), plain http is redirected when
SECURE_SSL_REDIRECT says so (Django's SecurityMiddleware decides), and every answer
carries the headers SecurityMiddleware, XFrameOptionsMiddleware and django-csp add
(computed by those middleware, once). A body is refused with 413 past
GATEWAY_MAX_BODY_BYTES, before the caller is authenticated: by its Content-Length before
any of it is read, or, sent chunked, as soon as what arrived is over the limit.

A long poll whose client goes away is cancelled at once, as Django would.
"""

import asyncio
import functools
import io
import json
import logging
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from urllib.parse import parse_qsl

from csp.middleware import CSPMiddleware
from django.conf import settings
from django.core.handlers.asgi import ASGIRequest
from django.core.signals import setting_changed
from django.http import HttpRequest, HttpResponse
from django.http.request import split_domain_port, validate_host
from django.middleware.clickjacking import XFrameOptionsMiddleware
from django.middleware.security import SecurityMiddleware
from django.urls import reverse

from events.outages import RETRY_AFTER_SECONDS, unavailable, unavailable_detail
from gateways.protocol import endpoints
from gateways.protocol.endpoints import Answer

log = logging.getLogger(__name__)
host_log = logging.getLogger("django.security.DisallowedHost")  # where Django logs them
SERVER_ERROR = Answer(500, b'{"detail": "Server error."}', {"Content-Type": "application/json"})


@functools.cache
def _endpoint_paths() -> tuple[str, re.Pattern]:
    """The config path and a pattern of ack paths, from the URL conf (which names the
    endpoints once; Django's own resolve() costs more than an ack's work)."""
    marker = "GATEWAYNAME"
    ack = re.escape(reverse("gateway-ack", kwargs={"name": marker}))
    return reverse("gateway-config"), re.compile(ack.replace(marker, r"(?P<name>[-a-zA-Z0-9_]+)"))


def _gateway_call(path: str) -> tuple[Callable[..., Awaitable[Answer]], dict[str, str]] | None:
    """(endpoint, URL kwargs) when `path` is a gateway endpoint, else None."""
    config_path, ack_path = _endpoint_paths()
    if path == config_path:
        return endpoints.poll, {}
    match = ack_path.fullmatch(path)
    return (endpoints.ack, match.groupdict()) if match else None


class _TooLarge(Exception):
    pass


async def _body(receive, limit: int) -> tuple[bytes, bool]:
    """The request body, and whether the client went away meanwhile; _TooLarge as soon as
    more than `limit` bytes arrived."""
    chunks = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return b"", True
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise _TooLarge
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks), False


async def _until_disconnected(receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


def _headers(scope) -> dict[bytes, bytes]:
    """The request headers by (lower-case) name; the last of a repeated one."""
    return dict(scope["headers"])


@dataclass(frozen=True)
class _Settings:
    """The settings every gateway call reads, read once (per settings change): a read of
    `settings.X` goes through its lazy wrapper, which cost 5 % of the server's CPU per
    call with thousands of gateways (bench/fleet.py)."""

    proxy_ssl_header: tuple[bytes, str] | None  # (header name in the scope, secure value)
    use_x_forwarded_host: bool
    ssl_redirect: bool
    max_body: int


@functools.cache
def _settings() -> _Settings:
    proxy = None
    if settings.SECURE_PROXY_SSL_HEADER:
        header, secure_value = settings.SECURE_PROXY_SSL_HEADER
        name = header.removeprefix("HTTP_").lower().replace("_", "-").encode("latin-1")
        proxy = (name, secure_value)
    return _Settings(
        proxy,
        settings.USE_X_FORWARDED_HOST,
        settings.SECURE_SSL_REDIRECT,
        settings.GATEWAY_MAX_BODY_BYTES,
    )


def _is_secure(scope, headers: dict[bytes, bytes]) -> bool:
    """HttpRequest.is_secure(), from the scope."""
    proxy = _settings().proxy_ssl_header
    if proxy is not None:
        name, secure_value = proxy
        value = headers.get(name)
        if value is not None:
            return value.decode("latin-1").split(",", 1)[0].strip() == secure_value
    return scope.get("scheme") == "https"


def _host_allowed(scope, headers: dict[bytes, bytes]) -> bool:
    """HttpRequest.get_host() would not raise DisallowedHost."""
    raw = headers.get(b"x-forwarded-host") if _settings().use_x_forwarded_host else None
    raw = raw or headers.get(b"host")
    if raw is None:
        server = scope.get("server") or ("", None)
        host = f"{server[0]}:{server[1]}" if server[1] else str(server[0])
    else:
        host = raw.decode("latin-1")
    if _valid_host(host):
        return True
    host_log.warning("Invalid HTTP_HOST header: %r.", host)
    return False


@functools.lru_cache(maxsize=256)  # a gateway fleet calls with a few hosts (~8 µs each)
def _valid_host(host: str) -> bool:
    allowed = settings.ALLOWED_HOSTS
    if settings.DEBUG and not allowed:
        allowed = [".localhost", "127.0.0.1", "[::1]"]
    domain, _ = split_domain_port(host)
    return bool(domain) and validate_host(domain, allowed)


def _https_redirect(scope) -> Answer | None:
    """SecurityMiddleware's redirect of a plain http request, if it makes one."""
    response = SecurityMiddleware(_no_view).process_request(ASGIRequest(scope, io.BytesIO()))
    if response is None:
        return None
    return Answer(response.status_code, b"", {"Location": response["Location"]})


def _no_view(request):
    raise AssertionError("only the middleware's own methods are called")


@functools.cache
def _security_headers(secure: bool) -> tuple[tuple[bytes, bytes], ...]:
    """What SecurityMiddleware, XFrameOptionsMiddleware and django-csp add to an answer,
    made by them once (per settings) on an empty answer."""

    class Request(HttpRequest):
        def is_secure(self) -> bool:
            return secure

    request, response = Request(), HttpResponse()
    del response["Content-Type"]
    for middleware in (SecurityMiddleware, XFrameOptionsMiddleware, CSPMiddleware):
        middleware(_no_view).process_response(request, response)
    return tuple((k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in response.items())


def _settings_changed(**kwargs) -> None:
    _settings.cache_clear()
    _security_headers.cache_clear()
    _valid_host.cache_clear()


setting_changed.connect(_settings_changed)


def _refusal(scope, headers: dict[bytes, bytes], secure: bool) -> Answer | None:
    """What Django's middleware would answer instead of the endpoint, and a body announced
    too large: before anything is read or authenticated."""
    if not _host_allowed(scope, headers):
        return endpoints.BAD_HOST
    if _settings().ssl_redirect and not secure:
        redirect = _https_redirect(scope)
        if redirect is not None:
            return redirect
    length = headers.get(b"content-length")
    return endpoints.content_length_refusal(
        None if length is None else length.decode("latin-1"), _settings().max_body
    )


async def _serve(endpoint, kwargs, scope, receive, headers) -> Answer | None:
    """The answer, or None when the client went away first."""
    authorization = headers.get(b"authorization", b"").decode("latin-1")
    method = scope["method"]
    limit = _settings().max_body
    try:
        body, gone = await _body(receive, limit)
    except _TooLarge:
        return endpoints.body_too_large(limit)
    if gone:
        return None
    if endpoint is endpoints.ack:
        return await endpoints.ack(method, authorization, kwargs["name"], body)
    query = _query(scope["query_string"].decode("latin-1"))
    return await _unless_gone(endpoints.poll(method, authorization, query), receive)


def _query(raw: str) -> dict[str, str]:
    """parse_qsl(raw, keep_blank_values=True) as a dict (the last value of a repeated name).
    A gateway's query (`known=N&wait=30&applied=N`) has nothing to unquote: then a split
    gives the same pairs at a third of the cost (parse_qsl was 3 % of a replica's CPU with
    5,000 gateways polling: bench/fleet.py under py-spy)."""
    if "%" in raw or "+" in raw:
        return dict(parse_qsl(raw, keep_blank_values=True))
    return dict(part.partition("=")[::2] for part in raw.split("&") if part)


async def _unless_gone(
    answering: Awaitable[Answer], receive: Callable[[], Awaitable[dict]]
) -> Answer | None:
    """`answering`'s answer, made in this task, or None when the client went away first
    (then it is cancelled). One task watching beside this one, rather than the answer in a
    task of its own and asyncio.wait() over both: ~20 µs less per poll measured alone, on
    every gateway's poll after every generation (bench/README.md, fleet.py)."""
    task = asyncio.current_task()
    assert task is not None, "called from a task"
    gone = False

    async def watch() -> None:
        nonlocal gone
        await _until_disconnected(receive)
        gone = True
        task.cancel()

    watching = asyncio.ensure_future(watch())
    try:
        return await answering
    except asyncio.CancelledError:
        # Ours only: a cancellation from elsewhere (the server stopping) goes on.
        if gone and task.uncancel() == 0:
            return None
        raise
    finally:
        watching.cancel()


async def _send(send, answer: Answer, secure: bool) -> None:
    headers = [(b"content-length", str(len(answer.body)).encode())]
    headers += [(name.lower().encode(), value.encode()) for name, value in answer.headers.items()]
    headers += _security_headers(secure)
    await send({"type": "http.response.start", "status": answer.status, "headers": headers})
    await send({"type": "http.response.body", "body": answer.body})


def _failed(scope, exc: Exception) -> Answer:
    """503 while the database or Redis is unavailable (as graylane.outages answers the rest:
    the gateway calls again; an ack is idempotent), else 500."""
    cause = unavailable(exc)
    if cause is None:
        log.exception("Gateway call %s %s failed.", scope["method"], scope["path"])
        return SERVER_ERROR
    method, path = scope["method"], scope["path"]
    log.warning("Gateway call %s %s: 503, %s is unavailable (%s).", method, path, cause, exc)
    body = json.dumps({"detail": unavailable_detail(cause, writes=method == "POST")})
    headers = {"Content-Type": "application/json", "Retry-After": str(RETRY_AFTER_SECONDS)}
    return Answer(503, body.encode(), headers)


def with_gateway_endpoints(django_app):
    """ASGI: gateway endpoints answered here, every other call (any other path, a
    websocket, lifespan) by `django_app`."""

    async def app(scope, receive, send):
        call = _gateway_call(scope["path"]) if scope["type"] == "http" else None
        if call is None:
            await django_app(scope, receive, send)
            return
        headers = _headers(scope)
        secure = _is_secure(scope, headers)
        try:
            answer = _refusal(scope, headers, secure)
            if answer is None:
                answer = await _serve(*call, scope, receive, headers)
        except Exception as exc:
            answer = _failed(scope, exc)
        if answer is not None:
            await _send(send, answer, secure)

    return app
