"""Django's HTTP requests under the ASGI server (graylane/wsgi_in_asgi.py): what reaches the
WSGI app, what reaches the client, and that a whole request runs in one thread."""

import asyncio
import threading

import httpx
import pytest

from graylane.wsgi_in_asgi import WsgiInAsgi, environ
from testing.processes import BASE_DIR, AsgiServer, database_url, django_env


def scope(**overrides) -> dict:
    return {
        "type": "http",
        "method": "POST",
        "path": "/api/v1/caf\u00e9/",
        "root_path": "",
        "query_string": b"a=1&b=%20",
        "http_version": "1.1",
        "scheme": "https",
        "server": ("gray.example", 443),
        "client": ("10.0.0.7", 51234),
        "headers": [
            (b"content-type", b"application/json"),
            (b"content-length", b"2"),
            (b"x-user-no", b"1001"),
            (b"accept", b"text/html"),
            (b"accept", b"application/json"),
            (b"cookie", b"a=1"),
            (b"cookie", b"b=2"),
        ],
        **overrides,
    }


def test_the_environ_carries_what_django_reads():
    env = environ(scope(), body=None)
    assert env["REQUEST_METHOD"] == "POST"
    # PEP 3333: the path's UTF-8 bytes as a latin-1 string (Django decodes it back).
    assert env["PATH_INFO"] == "/api/v1/caf\u00e9/".encode().decode("latin-1")
    assert env["QUERY_STRING"] == "a=1&b=%20"
    assert env["wsgi.url_scheme"] == "https"
    assert (env["SERVER_NAME"], env["SERVER_PORT"]) == ("gray.example", "443")
    assert env["REMOTE_ADDR"] == "10.0.0.7"
    assert env["CONTENT_TYPE"] == "application/json" and env["CONTENT_LENGTH"] == "2"
    assert env["HTTP_X_USER_NO"] == "1001"
    assert env["HTTP_ACCEPT"] == "text/html,application/json"
    assert env["HTTP_COOKIE"] == "a=1; b=2"


class Recorder:
    """A WSGI app that answers what it was sent and notes which thread did what."""

    def __init__(self, chunks=None):
        self.chunks = chunks
        self.threads: dict[str, int] = {}
        self.bodies: list[bytes] = []

    def __call__(self, env, start_response):
        self.threads["app"] = threading.get_ident()
        self.bodies.append(env["wsgi.input"].read(int(env.get("CONTENT_LENGTH") or 0)))
        start_response("201 Created", [("Content-Type", "text/plain"), ("Set-Cookie", " a=1")])
        return self.Response(self, self.chunks)

    class Response:
        def __init__(self, recorder, chunks):
            self.recorder = recorder
            self.streaming = chunks is not None
            self.chunks = chunks if chunks is not None else [b"posted: ", recorder.bodies[-1]]

        def __iter__(self):
            return iter(self.chunks)

        def close(self):
            self.recorder.threads["close"] = threading.get_ident()


def run(app, body_messages, **scope_overrides):
    """The ASGI messages `app` sends for a request whose body arrives as `body_messages`."""
    sent = []

    async def exchange():
        messages = list(body_messages)

        async def receive():
            return messages.pop(0) if messages else {"type": "http.disconnect"}

        async def send(message):
            sent.append(message)

        await app(scope(**scope_overrides), receive, send)

    asyncio.run(exchange())
    return sent


def test_a_request_runs_in_one_pool_thread_and_its_answer_is_sent():
    recorder = Recorder()
    app = WsgiInAsgi(recorder, threads=2)
    body = [
        {"type": "http.request", "body": b"{", "more_body": True},
        {"type": "http.request", "body": b"}"},
    ]
    start, content = run(app, body)
    assert recorder.bodies == [b"{}"], "the body arrived whole"
    assert start["status"] == 201
    assert (b"set-cookie", b"a=1") in start["headers"]
    assert content == {"type": "http.response.body", "body": b"posted: {}"}
    # request_finished (response.close) runs where the view ran: its database connection
    # is closed or given back to the pool by the thread that used it.
    assert recorder.threads["close"] == recorder.threads["app"] != threading.get_ident()


def test_a_streaming_answer_is_sent_chunk_by_chunk():
    recorder = Recorder(chunks=[b"one ", b"", b"two"])
    sent = run(WsgiInAsgi(recorder, threads=1), [{"type": "http.request", "body": b""}])
    assert sent[0]["status"] == 201
    assert [(m["body"], m.get("more_body", False)) for m in sent[1:]] == [
        (b"one ", True),
        (b"two", True),
        (b"", False),
    ]
    assert recorder.threads["close"] == recorder.threads["app"]


def test_a_client_that_goes_away_before_its_body_is_not_served():
    recorder = Recorder()
    sent = run(WsgiInAsgi(recorder, threads=1), [{"type": "http.disconnect"}])
    assert sent == [] and recorder.bodies == []


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_uvicorn_serves_pages_api_and_static_files_through_it():
    from django.db import connection

    with AsgiServer(django_env(database_url(connection.settings_dict))) as server:
        health = httpx.get(server.url + "/healthz", timeout=10)
        login = httpx.get(server.url + "/accounts/login/", timeout=10)
        api = httpx.get(server.url + "/api/v1/policy/", timeout=10)
        css = httpx.get(server.url + "/static/css/app.css", timeout=10)
    assert health.status_code == 200
    assert login.status_code == 200 and "csrftoken" in login.cookies
    assert api.status_code == 401 and api.json()["detail"]
    assert css.status_code == 200
    assert css.content == (BASE_DIR / "static" / "css" / "app.css").read_bytes()
