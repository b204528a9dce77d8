"""What Django's middleware does for every request, done on the gateway endpoints' ASGI short
path too (gateways/protocol/asgi.py), through the real ASGI app: body limits before
authentication, the Host check, the HTTPS redirect and the security headers."""

import asyncio
import json

import pytest
from django.test import override_settings

from graylane.asgi import application

LIMIT = 65_536
ACK = "/api/v1/gateways/edge/ack/"
CONFIG = "/api/v1/gateway-config/"
SECURITY_HEADERS = (
    b"x-content-type-options",
    b"referrer-policy",
    b"cross-origin-opener-policy",
    b"x-frame-options",
    b"content-security-policy",
)


def scope(path: str, *, method: str = "POST", headers=(), host=b"127.0.0.1", **extra) -> dict:
    return {
        "type": "http",
        "method": method,
        "path": path,
        "query_string": extra.pop("query", b""),
        "scheme": extra.pop("scheme", "http"),
        "headers": [(b"host", host), (b"authorization", b"Token not-a-gateway"), *headers],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
        **extra,
    }


class Call:
    """One request through graylane.asgi.application; `messages` are what receive() hands
    out (then it waits for ever, like a client sending nothing more)."""

    def __init__(self, scope: dict, messages=()):
        self.scope = scope
        self.messages = iter(messages)
        self.received = 0
        self.sent: list[dict] = []

    async def _receive(self):
        self.received += 1
        message = next(self.messages, None)
        if message is None:
            await asyncio.Event().wait()
        return message

    async def _send(self, message):
        self.sent.append(message)

    def run(self) -> "Call":
        asyncio.run(asyncio.wait_for(application(self.scope, self._receive, self._send), 5))
        return self

    @property
    def status(self) -> int:
        return self.sent[0]["status"]

    @property
    def headers(self) -> dict[bytes, bytes]:
        return dict(self.sent[0]["headers"])

    @property
    def json(self):
        return json.loads(self.sent[1]["body"])


def chunks(size: int = 16_384, count: int = 64):
    """A chunked upload (no Content-Length) of `count` chunks: 1 MiB by default. Finite, so
    that a server reading it all (as it did) fails the test instead of eating memory."""
    for index in range(count):
        yield {"type": "http.request", "body": b"x" * size, "more_body": index < count - 1}


def test_a_body_announced_over_the_limit_is_413_before_a_byte_is_read_or_the_token_checked():
    call = Call(scope(ACK, headers=[(b"content-length", str(LIMIT + 1).encode())])).run()
    assert call.status == 413  # not 401: the (bad) token was never looked at
    assert call.json == {"detail": f"The request body is larger than {LIMIT} bytes."}
    assert call.received == 0, "the body was not read"
    assert call.headers[b"connection"] == b"close"
    assert call.headers[b"content-type"] == b"application/json"


def test_a_chunked_body_is_cut_off_as_soon_as_it_is_over_the_limit():
    call = Call(scope(ACK), chunks(16_384)).run()
    assert call.status == 413
    # 4 chunks are exactly the limit, the 5th is over it; not one more is read.
    assert call.received == LIMIT // 16_384 + 1


@pytest.mark.django_db(transaction=True)  # the token is looked up in a thread of its own
@override_settings(GATEWAY_MAX_BODY_BYTES=100)
def test_the_limit_is_a_setting_and_holds_for_the_long_poll_too():
    big = [(b"content-length", b"101")]
    assert Call(scope(CONFIG, method="GET", headers=big)).run().status == 413
    ok = [(b"content-length", b"100")]
    body = {"type": "http.request", "body": b"x" * 100, "more_body": False}
    assert Call(scope(CONFIG, method="GET", headers=ok), [body]).run().status == 401


def test_a_bad_content_length_is_400():
    call = Call(scope(ACK, headers=[(b"content-length", b"\xb2")])).run()
    assert call.status == 400


def test_a_host_not_in_allowed_hosts_is_400_as_django_answers_it():
    call = Call(scope(ACK, host=b"evil.example")).run()
    assert call.status == 400
    # The same answer as Django's own for that Host under /api/ (graylane.api_errors).
    django = Call(scope("/api/v1/policy/", method="GET", host=b"evil.example"), [_empty()])
    django.run()
    assert (call.status, call.json) == (django.status, django.json)
    assert call.received == 0


@pytest.mark.django_db(transaction=True)
def test_an_allowed_host_with_a_port_passes_on_to_the_endpoint():
    assert Call(scope(ACK, host=b"localhost:8000"), [_empty()]).run().status == 401


def _empty():
    return {"type": "http.request", "body": b"", "more_body": False}


def test_answers_carry_the_security_headers_django_adds_elsewhere():
    call = Call(scope(ACK, host=b"evil.example")).run()
    django = Call(scope("/healthz", method="GET"), [_empty()]).run()
    for name in SECURITY_HEADERS:
        assert name in call.headers, name
        assert call.headers[name] == django.headers[name], name
    assert call.headers[b"x-content-type-options"] == b"nosniff"
    assert b"script-src 'self'" in call.headers[b"content-security-policy"]
    assert b"strict-transport-security" not in call.headers  # plain http


@override_settings(
    SECURE_HSTS_SECONDS=3600, SECURE_PROXY_SSL_HEADER=("HTTP_X_FORWARDED_PROTO", "https")
)
def test_hsts_over_https_also_behind_a_tls_proxy():
    for secure in (
        scope(ACK, scheme="https"),
        scope(ACK, headers=[(b"x-forwarded-proto", b"https")]),
    ):
        call = Call(secure, [_empty()]).run()
        assert call.headers[b"strict-transport-security"] == b"max-age=3600", secure
    assert b"strict-transport-security" not in Call(scope(ACK), [_empty()]).run().headers


@override_settings(SECURE_SSL_REDIRECT=True)
def test_plain_http_is_redirected_when_ssl_redirect_is_on():
    call = Call(scope(CONFIG, method="GET", query=b"known=3&wait=30")).run()
    assert call.status == 301
    assert call.headers[b"location"] == b"https://127.0.0.1/api/v1/gateway-config/?known=3&wait=30"
    https = Call(scope(ACK, scheme="https", headers=[(b"content-length", b"999999")])).run()
    assert https.status == 413  # not redirected


def test_the_drf_views_refuse_the_same_bodies_the_same_way(client):
    response = client.post(
        ACK, b"x" * (LIMIT + 1), content_type="application/json", HTTP_AUTHORIZATION="Token x"
    )
    assert response.status_code == 413
    assert response.json() == {"detail": f"The request body is larger than {LIMIT} bytes."}


def test_the_drf_views_refuse_a_bad_host_as_the_asgi_path_does(client):
    response = client.post(ACK, {}, HTTP_HOST="evil.example")
    assert response.status_code == 400
    assert response.json() == {"detail": "Bad request."}
