"""Serving the gateway endpoints (gateways/gateway_api.py) straight from ASGI.

Django's ASGI handler costs more per request than the endpoints' own work (building the
request, signals, middleware, a thread-sensitive context per request; with a sync-only
middleware in the chain a thread even blocks for the whole of a long poll). A new
generation brings every gateway back at once, so here the two endpoints take the path,
method, Authorization header, query and body from the ASGI scope and answer directly.
Every other request goes to Django as before.

A long poll whose client goes away is cancelled at once, as Django would.
"""

import asyncio
import functools
import logging
import re
from urllib.parse import parse_qsl

from django.urls import reverse

from gateways import gateway_api
from gateways.gateway_api import Answer

log = logging.getLogger(__name__)
SERVER_ERROR = Answer(500, b'{"detail": "Server error."}', {"Content-Type": "application/json"})


@functools.cache
def _endpoint_paths() -> tuple[str, re.Pattern]:
    """The config path and a pattern of ack paths, from the URL conf (which names the
    endpoints once; Django's own resolve() costs more than an ack's work)."""
    marker = "GATEWAYNAME"
    ack = re.escape(reverse("gateway-ack", kwargs={"name": marker}))
    return reverse("gateway-config"), re.compile(ack.replace(marker, r"(?P<name>[-a-zA-Z0-9_]+)"))


def _gateway_call(path: str):
    """(view, URL kwargs) when `path` is a gateway endpoint, else None."""
    config_path, ack_path = _endpoint_paths()
    if path == config_path:
        return gateway_api.gateway_config, {}
    match = ack_path.fullmatch(path)
    return (gateway_api.gateway_ack, match.groupdict()) if match else None


async def _body(receive) -> tuple[bytes, bool]:
    """The request body, and whether the client went away meanwhile."""
    chunks = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return b"", True
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks), False


async def _until_disconnected(receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


async def _serve(view, kwargs, scope, receive) -> Answer | None:
    """The answer, or None when the client went away first."""
    authorization = ""
    for name, value in scope["headers"]:
        if name == b"authorization":
            authorization = value.decode("latin-1")
    method = scope["method"]
    body, gone = await _body(receive)
    if gone:
        return None
    if view is gateway_api.gateway_ack:
        return await gateway_api.ack(method, authorization, kwargs["name"], body)
    query = dict(parse_qsl(scope["query_string"].decode("latin-1"), keep_blank_values=True))
    answering = asyncio.ensure_future(gateway_api.poll(method, authorization, query))
    watching = asyncio.ensure_future(_until_disconnected(receive))
    try:
        await asyncio.wait({answering, watching}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        watching.cancel()
        if not answering.done():
            answering.cancel()
    return answering.result() if answering.done() and not answering.cancelled() else None


async def _send(send, answer: Answer) -> None:
    headers = [(b"content-length", str(len(answer.body)).encode())]
    headers += [(name.lower().encode(), value.encode()) for name, value in answer.headers.items()]
    await send({"type": "http.response.start", "status": answer.status, "headers": headers})
    await send({"type": "http.response.body", "body": answer.body})


def with_gateway_endpoints(django_app):
    """The ASGI app for HTTP: gateway endpoints answered here, the rest by `django_app`."""

    async def app(scope, receive, send):
        call = _gateway_call(scope["path"]) if scope["type"] == "http" else None
        if call is None:
            await django_app(scope, receive, send)
            return
        try:
            answer = await _serve(*call, scope, receive)
        except Exception:
            log.exception("Gateway call %s %s failed.", scope["method"], scope["path"])
            answer = SERVER_ERROR
        if answer is not None:
            await _send(send, answer)

    return app
