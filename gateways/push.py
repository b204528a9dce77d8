"""Push mode: POST the document to the gateway, signed (gateways/signing.py). The gateway
answers 2xx `{"generation": N}` with the generation it runs; it must never go back to a
lower generation than the one it runs, so of two deliveries crossing on the wire the older
one is refused and answered with the newer number.

A new generation is pushed to every push gateway at once (gateways.delivery), so the cost
of one POST is paid many times in a burst: the standard library's http.client costs a third
of httpx's CPU per request (measured), and keep-alive connections are kept per endpoint.
"""

import http.client
import json
import os
import select
import socket
import ssl
import threading
from urllib.parse import urlsplit

from django.conf import settings

from gateways import signing
from gateways.errors import DeliveryError
from gateways.generation import Snapshot
from gateways.models import Gateway
from registry_sync.adapters._http import excerpt

# Errors of a kept-alive connection that the gateway closed meanwhile: the request did not
# reach it, so it is sent again once on a new connection.
_CLOSED_MEANWHILE = (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError)
_TLS = ssl.create_default_context()


class ConnectionPool:
    """Idle keep-alive connections per (scheme, host, port), shared by threads."""

    def __init__(self):
        self._idle: dict[tuple[str, str, int], list[http.client.HTTPConnection]] = {}
        self._lock = threading.Lock()
        self._pid = os.getpid()

    def post(self, url: str, body: bytes, headers: dict[str, str], timeout: float):
        """(status, body) of POST `url`; raises OSError or http.client.HTTPException."""
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {url!r}")
        port = parts.port or (443 if parts.scheme == "https" else 80)
        origin = (parts.scheme, parts.hostname, port)
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        headers = {"Host": parts.netloc, **headers}
        reused = self._take(origin)
        connection = reused or self._connect(origin, timeout)
        try:
            status, answer = self._exchange(origin, connection, target, body, headers, timeout)
        except _CLOSED_MEANWHILE:
            connection.close()
            if reused is None:
                raise
            connection = self._connect(origin, timeout)
            status, answer = self._exchange(origin, connection, target, body, headers, timeout)
        except BaseException:
            connection.close()
            raise
        return status, answer

    def _exchange(self, origin, connection, target, body, headers, timeout):
        connection.timeout = timeout
        if connection.sock is not None:
            connection.sock.settimeout(timeout)
        connection.request("POST", target, body=body, headers=headers)
        response = connection.getresponse()
        answer = response.read()
        if response.will_close:
            connection.close()
        else:
            with self._lock:
                self._idle.setdefault(origin, []).append(connection)
        return response.status, answer

    def _take(self, origin) -> http.client.HTTPConnection | None:
        with self._lock:
            if self._pid != os.getpid():  # a forked worker: the parent's sockets are not ours
                self._idle, self._pid = {}, os.getpid()
            idle = self._idle.get(origin, [])
            while idle:
                connection = idle.pop()
                # Readable while idle means the gateway hung up (or sent what nobody asked
                # for): that connection is done; the POST goes on another one.
                if (
                    connection.sock is not None
                    and not select.select([connection.sock], [], [], 0)[0]
                ):
                    return connection
                connection.close()
            return None

    @staticmethod
    def _connect(origin, timeout: float) -> http.client.HTTPConnection:
        scheme, host, port = origin
        if scheme == "https":
            connection = http.client.HTTPSConnection(host, port, timeout=timeout, context=_TLS)
        else:
            connection = http.client.HTTPConnection(host, port, timeout=timeout)
        connection.connect()
        # Headers and body leave in separate writes; without this the body waits for the
        # delayed ACK of the headers (40 ms on Linux).
        connection.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return connection


_pool = ConnectionPool()


def push(gateway: Gateway, snapshot: Snapshot) -> int:
    """Send `snapshot`; returns the generation the gateway says it runs."""
    headers = {
        "Content-Type": "application/json",
        signing.HEADER: signing.sign(gateway.push_secret, snapshot.body),
        "X-Graylane-Gateway": gateway.name,
        "X-Graylane-Generation": str(snapshot.number),
    }
    try:
        status, answer = _pool.post(
            gateway.endpoint, snapshot.body, headers, settings.GATEWAY_PUSH_TIMEOUT
        )
    except (OSError, http.client.HTTPException, ValueError) as exc:
        raise DeliveryError(f"POST {gateway.endpoint}: {type(exc).__name__}: {exc}") from exc
    text = answer.decode("utf-8", errors="replace")
    if not 200 <= status < 300:
        raise DeliveryError(f"POST {gateway.endpoint} -> HTTP {status}: {excerpt(text)}")
    try:
        applied = json.loads(answer)["generation"]
    except (ValueError, KeyError, TypeError):
        applied = None
    if not isinstance(applied, int) or isinstance(applied, bool):
        raise DeliveryError(
            f"POST {gateway.endpoint} answered without the generation it applied: {excerpt(text)}"
        )
    return applied
