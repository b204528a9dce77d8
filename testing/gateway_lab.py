"""The world of the gateway's tests (tests/test_gateway_*.py).

Instances: real HTTP/1.1 servers on loopback ports, all served by one asyncio loop in a
background thread. Each answers `{"version", "instance", "gray_status", "headers", "body"}`
(what it received), keeps its connections alive and records every request; `mode` makes
it misbehave the ways the gateway must survive, and a path ending in /fail gets a 500. Lab:
the dashboard side (registering instances over the embedded registry's HTTP API, policy and
instance changes through the REST API) and the gateway processes."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from dataclasses import dataclass, field

import httptools
import httpx

from accounts.models import ApiToken
from registry_sync.models import Instance, Registry
from registry_sync.sync import acquire_lease, release_lease, sync_registry
from testing.processes import GatewayProcess, free_port

OK = "ok"
SHUTTING_DOWN = "shutting_down"  # 503 + X-Instance-Shutting-Down: true
HANG_UP = "hang_up"  # reads the whole request, then closes the connection unanswered
SILENT = "silent"  # reads the whole request and never answers
FAILING_FIFTH = "failing_fifth"  # answers every fifth request with a 500 (20 % errors)
HOP_HEADERS = "hop_headers"  # answers with hop-by-hop headers a gateway must not pass on
COUNTING = "counting"  # answers with the size of the body it read, keeping none of it
SLOW_READER = "slow_reader"  # as COUNTING, but reads its socket once every 10 ms
FAIL_SUFFIX = "/fail"  # an OK instance answers a path ending so with 500 (its own error)
SLOW_SUFFIX = "/slow"  # an OK instance answers a path ending so after SLOW_SECONDS
SLOW_SECONDS = 0.03
# Answers `{"path"}` whatever its version (so two versions answer alike), or what its
# `answers` say for a path: versions that differ only where a test says.
STATIC = "static"


@dataclass
class Received:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Upstream:
    version: str
    mode: str = OK
    port: int = field(default_factory=free_port)
    received: list[Received] = field(default_factory=list)
    connections: set = field(default_factory=set)
    answers: dict[str, tuple[int, bytes]] = field(default_factory=dict)  # path -> STATIC's

    @property
    def name(self) -> str:
        return f"{self.version}@{self.port}"


class _Connection(asyncio.Protocol):
    def __init__(self, upstream: Upstream):
        self.upstream = upstream
        self.parser = httptools.HttpRequestParser(self)

    def connection_made(self, transport) -> None:
        self.transport = transport
        self.upstream.connections.add(transport)

    def connection_lost(self, exc) -> None:
        self.upstream.connections.discard(self.transport)

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError:
            self.transport.close()
        if self.upstream.mode == SLOW_READER:
            self.transport.pause_reading()
            asyncio.get_running_loop().call_later(0.01, self.transport.resume_reading)

    def on_message_begin(self) -> None:
        self.headers: dict[str, str] = {}
        self.url, self.body, self.size = b"", b"", 0

    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers[name.decode().lower()] = value.decode("latin-1")

    def on_body(self, body: bytes) -> None:
        self.size += len(body)
        if self.upstream.mode not in (COUNTING, SLOW_READER):
            self.body += body

    def on_message_complete(self) -> None:
        upstream = self.upstream
        method = self.parser.get_method().decode()
        upstream.received.append(Received(method, self.url.decode(), self.headers, self.body))
        if upstream.mode == HANG_UP:
            self.transport.close()
            return
        if upstream.mode == SILENT:
            return
        if upstream.mode == SHUTTING_DOWN:
            body = b'{"detail": "shutting down"}'
            extra = b"X-Instance-Shutting-Down: true\r\n"
            status = b"503 Service Unavailable"
        elif upstream.mode == FAILING_FIFTH and len(upstream.received) % 5 == 0:
            body = b'{"error": "injected"}'
            extra = b""
            status = b"500 Internal Server Error"
        elif upstream.mode in (COUNTING, SLOW_READER):
            body = json.dumps({"version": upstream.version, "received": self.size}).encode()
            extra = b""
            status = b"200 OK"
        elif upstream.mode == STATIC:
            path = self.url.decode().split("?")[0]
            code, body = upstream.answers.get(path, (200, json.dumps({"path": path}).encode()))
            extra = b""
            status = b"%d %b" % (code, b"OK" if code < 400 else b"Error")
        elif upstream.mode == HOP_HEADERS:
            body = b"{}"
            extra = (
                b"Connection: keep-alive, X-Hop\r\nX-Hop: 1\r\nKeep-Alive: timeout=5\r\n"
                b"Proxy-Authenticate: Basic\r\nTrailer: X-Sum\r\nX-End-To-End: kept\r\n"
            )
            status = b"200 OK"
        else:
            body = json.dumps(
                {
                    "version": upstream.version,
                    "instance": upstream.name,
                    "gray_status": self.headers.get("x-gray-status"),
                    "headers": self.headers,
                    "body": self.body.decode("latin-1"),
                }
            ).encode()
            extra = b""
            path = self.url.decode().split("?")[0]
            status = b"500 Internal Server Error" if path.endswith(FAIL_SUFFIX) else b"200 OK"
            if path.endswith(SLOW_SUFFIX):
                answer = self._answer(status, extra, body)
                asyncio.get_running_loop().call_later(SLOW_SECONDS, self.transport.write, answer)
                return
        self.transport.write(self._answer(status, extra, body))

    @staticmethod
    def _answer(status: bytes, extra: bytes, body: bytes) -> bytes:
        return (
            b"HTTP/1.1 %b\r\nContent-Type: application/json\r\nContent-Length: %d\r\n%b\r\n%b"
            % (status, len(body), extra, body)
        )


class UpstreamFleet:
    """`with UpstreamFleet() as fleet: fleet.add("V1")` -> a started Upstream."""

    def __enter__(self) -> UpstreamFleet:
        self.loop = asyncio.new_event_loop()
        self.servers: list[asyncio.Server] = []
        self.upstreams: list[Upstream] = []
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        return self

    def add(self, version: str, mode: str = OK) -> Upstream:
        upstream = Upstream(version, mode)

        async def start() -> None:
            server = await self.loop.create_server(
                lambda: _Connection(upstream), "127.0.0.1", upstream.port
            )
            self.servers.append(server)

        asyncio.run_coroutine_threadsafe(start(), self.loop).result(5)
        self.upstreams.append(upstream)
        return upstream

    def __exit__(self, *exc_info) -> None:
        async def stop() -> None:
            for server in self.servers:
                server.close()
            for upstream in self.upstreams:
                for transport in list(upstream.connections):
                    transport.close()

        asyncio.run_coroutine_threadsafe(stop(), self.loop).result(5)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
        self.loop.close()


class Lab:
    """A dashboard (a real uvicorn on the test database), instances registered in its
    embedded registry over HTTP, and gateway processes pulling from it, for one test."""

    def __init__(self, dashboard, fleet: UpstreamFleet, make_user, make_gateway, tmp_path):
        self.dashboard = dashboard
        self.fleet = fleet
        self.tmp_path = tmp_path
        self.registry, _ = Registry.objects.get_or_create(
            name="embedded", defaults={"kind": Registry.EMBEDDED}
        )
        self.service_token = ApiToken.objects.issue(make_user("fleet", "service"))[1]
        self.operator_token = ApiToken.objects.issue(make_user("olga", "operator"))[1]
        self.admin_token = ApiToken.objects.issue(make_user("ada", "admin"))[1]
        self.make_gateway = make_gateway
        self.tokens: dict[str, str] = {}
        self.gateways: list[GatewayProcess] = []

    def instance(self, service: str, version: str, mode: str = OK) -> Upstream:
        """A started instance of `service`, registered (sync() brings it into traffic)."""
        upstream = self.fleet.add(version, mode)
        self.register(service, upstream.port, version)
        return upstream

    def register(self, service: str, port: int, version: str) -> None:
        response = httpx.post(
            self.dashboard.url + "/nacos/v1/ns/instance",
            params={
                "serviceName": service,
                "ip": "127.0.0.1",
                "port": port,
                "metadata": json.dumps({"version": version}),
                "accessToken": self.service_token,
            },
        )
        assert response.text == "ok", response.text

    def sync(self) -> None:
        """What the periodic registry sync does, now: new instances become routable. Under
        the registry's lease like every sync, as a worker's beat may be syncing it too."""
        deadline = time.monotonic() + 30
        while not acquire_lease(self.registry):
            assert time.monotonic() < deadline, "another sync held the registry's lease for 30 s"
            time.sleep(0.05)
        try:
            sync_registry(self.registry)
        finally:
            release_lease(self.registry)

    def policy(self, **fields) -> dict:
        response = httpx.patch(
            self.dashboard.url + "/api/v1/policy/",
            json=fields,
            headers=auth(self.operator_token),
        )
        assert response.status_code == 200, response.text
        return response.json()

    def offline(self, upstream: Upstream) -> None:
        pk = Instance.objects.get(port=upstream.port).pk
        response = httpx.post(
            f"{self.dashboard.url}/api/v1/instances/{pk}/offline/",
            headers=auth(self.operator_token),
        )
        assert response.status_code == 202, response.text

    def gateway_row(self, name: str) -> dict:
        response = httpx.get(
            self.dashboard.url + "/api/v1/gateways/", headers=auth(self.admin_token)
        )
        return next(row for row in response.json()["results"] if row["name"] == name)

    def start_gateway(
        self, *extra: str, name: str = "gw-test", port: int = 0, dashboard: str = ""
    ) -> GatewayProcess:
        """A started gateway process; its token is made on the first use of `name`.
        `dashboard`: its --dashboard (default: the lab's dashboard)."""
        if name not in self.tokens:
            self.tokens[name] = self.make_gateway(name)[1]
        gateway = GatewayProcess(
            dashboard or self.dashboard.url,
            self.tokens[name],
            self.tmp_path / f"{name}.json",
            *extra,
            port=port,
        )
        gateway.start()
        self.gateways.append(gateway)
        return gateway

    def stop(self) -> None:
        for gateway in self.gateways:
            gateway.stop()


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Token {token}"}
