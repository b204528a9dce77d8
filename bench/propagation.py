"""Publish -> every gateway acked: how long a policy change takes to reach 50 gateways.

Run:  .venv/bin/python bench/propagation.py [--publishes 20] [--database URL] [--redis URL]

It makes its own database (a temporary SQLite file; or `--database postgres://.../name`,
dropped and created anew), runs uvicorn serving graylane.asgi as a subprocess (with
`--redis`, also a `celery -A graylane worker`; without, the jobs run inside the server as with
`make run`), and plays 50 gateways on loopback in this process: 25 pull gateways that
long-poll `GET /api/v1/gateway-config/` and ack, and 25 push gateways (HTTP servers that
verify the signature and answer the generation they run). Each round publishes a policy
change through the API and measures from just before that request until the control
plane has recorded the last of the 50 acks (the largest `acked_at`). Printed: p50 and p99
over the rounds, next to the p50 of one bare keep-alive HTTP round trip on loopback (the
floor). The last line is the figure, p99; the target (shared/targets.md) is <= 50 ms.
"""

import argparse
import asyncio
import gc
import http.client
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

PULL, PUSH = 25, 25
TARGET_P99_MS = 50.0


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--publishes", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--database", help="postgres://... (default: a temporary SQLite file)")
    parser.add_argument("--redis", help="redis://... (default: no Redis, jobs inside the server)")
    args = parser.parse_args()
    if not 1 <= args.warmup + args.publishes <= 100:
        parser.error("each round sets a new percent: at most 100 rounds in all")
    return args


def configure(args) -> str:
    """Point this process (and, through the environment, its children) at the bench's own
    database and broker; returns the DATABASE_URL."""
    if args.database:
        database = args.database
        _recreate_postgres(database)
    else:
        database = f"sqlite:///{tempfile.mkdtemp(prefix='graylane-bench-')}/bench.sqlite3"
    os.environ.update(
        DJANGO_SETTINGS_MODULE="graylane.settings",
        DATABASE_URL=database,
        SECRET_KEY="bench-only-secret-key",
        LOG_LEVEL="WARNING",
        REDIS_PREFIX=f"graylane-bench-{os.getpid()}",
    )
    os.environ.pop("REDIS_URL", None)
    if args.redis:
        os.environ["REDIS_URL"] = args.redis
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    return database


def _recreate_postgres(url: str) -> None:
    import psycopg

    parts = urlsplit(url)
    name = parts.path.lstrip("/")
    with psycopg.connect(parts._replace(path="/postgres").geturl(), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')


def floor_round_trip_ms(requests: int = 2000) -> float:
    """p50 of one bare keep-alive HTTP/1.1 round trip on loopback (a stdlib server thread)."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # headers and body are two writes

        def do_GET(self):  # noqa: N802 - stdlib name
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    connection = http.client.HTTPConnection("127.0.0.1", server.server_address[1])
    samples = []
    for _ in range(requests):
        started = time.perf_counter()
        connection.request("GET", "/")
        connection.getresponse().read()
        samples.append(time.perf_counter() - started)
    connection.close()
    server.shutdown()
    return statistics.median(samples) * 1000


async def read_message(reader) -> tuple[str, dict[str, str], bytes]:
    """One HTTP/1.1 message with a Content-Length: (first line, headers, body)."""
    head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
    headers = {}
    for line in head[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    body = await reader.readexactly(int(headers.get("content-length") or 0))
    return head[0], headers, body


def loopback_push_gateway():
    """A push gateway served by asyncio in this process (the tests' PushReceiver uses
    threads; 25 of them would compete with the pull gateways for this process's GIL)."""
    from gateways import signing
    from gateways.tests.receiver import PushGateway

    class LoopbackPushGateway(PushGateway):
        async def start(self) -> "LoopbackPushGateway":
            self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
            self.url = f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"
            return self

        async def _serve(self, reader, writer) -> None:
            try:
                while True:  # keep-alive: one request after the other
                    _, headers, body = await read_message(reader)
                    status, answer = self.receive(headers.get(signing.HEADER.lower(), ""), body)
                    writer.write(
                        b"HTTP/1.1 %d -\r\nContent-Type: application/json\r\n"
                        b"Content-Length: %d\r\n\r\n%s" % (status, len(answer), answer)
                    )
                    await writer.drain()
            except (asyncio.IncompleteReadError, ConnectionError):
                writer.close()

    return LoopbackPushGateway(secret="set when its gateway is made")


class LoopbackClient:
    """One keep-alive HTTP/1.1 connection with a token. Plain asyncio streams rather than an
    HTTP client library, so that the bench measures the control plane, not the client's
    overhead (it shares the machine's two cores; httpx costs ~2 ms a request here)."""

    def __init__(self, port: int, token: str):
        self.port, self.token = port, token

    async def connect(self) -> None:
        self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)

    def close(self) -> None:
        self.writer.close()

    async def request(self, method: str, path: str, body: bytes = b"") -> tuple[int, bytes]:
        self.writer.write(
            f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Authorization: Token {self.token}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        status_line, _, answer = await read_message(self.reader)
        return int(status_line.split()[1]), answer


class PullGateway(LoopbackClient):
    """A pull gateway: long-poll, ack, repeat."""

    def __init__(self, port: int, name: str, token: str):
        super().__init__(port, token)
        self.name = name

    async def run(self, known: int) -> None:
        await self.connect()
        try:
            while True:
                status, body = await self.request(
                    "GET", f"/api/v1/gateway-config/?known={known}&wait=30"
                )
                if status != 200:
                    continue
                known = json.loads(body)["generation"]
                ack = json.dumps({"generation": known}).encode()
                status, body = await self.request("POST", f"/api/v1/gateways/{self.name}/ack/", ack)
                if status != 200:
                    raise RuntimeError(f"{self.name}: ack answered {status}: {body!r}")
        finally:
            self.close()


def make_gateways(push_gateways) -> tuple[list[tuple[str, str]], str]:
    """25 pull and 25 push gateways and an operator; returns the pull gateways' (name,
    token) and the operator's API token."""
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group

    from accounts.models import ApiToken
    from accounts.roles import OPERATOR
    from gateways.models import Gateway

    pull = []
    for n in range(PULL):
        gateway, token, _ = Gateway.objects.create_with_credentials(name=f"pull-{n}")
        pull.append((gateway.name, token))
    for n, push in enumerate(push_gateways):
        _, _, push.secret = Gateway.objects.create_with_credentials(
            name=f"push-{n}", mode=Gateway.PUSH, endpoint=push.url + "/graylane"
        )
    operator = get_user_model().objects.create_user("bench-operator")
    operator.groups.add(Group.objects.get(name=OPERATOR))
    return pull, ApiToken.objects.issue(operator)[1]


def newest_generation() -> int:
    # Read only: making the first generation here would queue deliveries in this process.
    from gateways.models import Generation

    return Generation.objects.order_by("-number").values_list("number", flat=True).first() or 0


def all_acked_at(number: int) -> float | None:
    """When the control plane recorded the last ack of `number`, once all 50 have it."""
    from django.db.models import Count, Max

    from gateways.models import Gateway

    acked = Gateway.objects.filter(acked_generation__gte=number).aggregate(
        n=Count("pk"), last=Max("acked_at")
    )
    return acked["last"].timestamp() if acked["n"] == PULL + PUSH else None


async def rounds(server_url: str, pull, operator_key: str, percents: range) -> list[float]:
    """One round per value of `percents`: publish it, wait for the 50 acks."""
    from asgiref.sync import sync_to_async

    known = await sync_to_async(newest_generation)()
    port = urlsplit(server_url).port
    pollers = [asyncio.create_task(PullGateway(port, *gw).run(known)) for gw in pull]
    operator = LoopbackClient(port, operator_key)
    await operator.connect()
    latencies = []
    try:
        for percent in percents:
            await asyncio.sleep(0.1)  # every pull gateway is waiting again
            change = json.dumps({"percent": percent}).encode()
            started = time.time()
            status, answer = await operator.request("PATCH", "/api/v1/policy/", change)
            if status != 200:
                raise RuntimeError(f"publishing answered {status}: {answer!r}")
            number = await sync_to_async(newest_generation)()
            deadline = time.monotonic() + 30
            while (done := await sync_to_async(all_acked_at)(number)) is None:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"generation {number} not acked by all 50 in 30 s")
                await asyncio.sleep(0.02)  # when to stop waiting, not what is measured
            latencies.append((done - started) * 1000)
    finally:
        operator.close()
        for poller in pollers:
            poller.cancel()
    return latencies


async def run(args, database: str) -> list[float]:
    from asgiref.sync import sync_to_async

    from tests.processes import AsgiServer, CeleryWorker, django_env

    push_gateways = [await loopback_push_gateway().start() for _ in range(PUSH)]
    pull, operator_key = await sync_to_async(make_gateways)(push_gateways)
    extra = {"REDIS_URL": args.redis} if args.redis else {"IN_PROCESS_JOBS": "true"}
    env = django_env(database, REDIS_PREFIX=os.environ["REDIS_PREFIX"], **extra)
    processes = [CeleryWorker(env)] if args.redis else []
    processes.append(AsgiServer(env))
    try:
        for process in processes:
            await asyncio.to_thread(process.start)
        url = processes[-1].url
        # Each round sets a new percent (1..100), so each publish is a real change.
        await rounds(url, pull, operator_key, range(1, args.warmup + 1))
        # This process plays the gateways: a full garbage collection of its Django heap
        # (40-70 ms here) would hold up their answers and be measured as the control plane's.
        gc.freeze()
        return await rounds(
            url, pull, operator_key, range(args.warmup + 1, args.warmup + 1 + args.publishes)
        )
    finally:
        for process in processes:
            await asyncio.to_thread(process.stop)


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def main() -> None:
    args = parse_args()
    database = configure(args)
    latencies = asyncio.run(run(args, database))
    floor = floor_round_trip_ms()
    p50, p99 = percentile(latencies, 0.5), percentile(latencies, 0.99)
    backend = "PostgreSQL" if database.startswith("postgres") else "SQLite"
    jobs = "Redis + a celery worker" if args.redis else "jobs inside the server (no Redis)"
    print(f"propagation: {PULL} pull + {PUSH} push gateways on loopback, {backend}, {jobs}")
    print(f"publish -> all 50 acked, {len(latencies)} publishes: p50 {p50:.1f}, p99 {p99:.1f} ms")
    print(
        f"bare keep-alive HTTP round trip on loopback (the floor): p50 {floor:.3f} ms; "
        f"p99 is {p99 / floor:,.0f}x that"
    )
    print(f"p99 publish -> 50 gateways acked: {p99:.1f} ms (target <= {TARGET_P99_MS:g} ms)")


if __name__ == "__main__":
    main()
