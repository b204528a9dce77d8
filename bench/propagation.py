"""Publish -> every gateway acked: how long a policy change takes to reach N pull + M push
gateways, and how much server CPU each publish costs.

Run:  .venv/bin/python bench/propagation.py [--quick] [--publishes 200] [--warmup 5]
                                            [--pull 25] [--push 25]
                                            [--database postgres://.../NAME] [--redis URL]

It makes its own database (a SQLite file in a temporary directory; or with `--database
postgres://.../NAME`, NAME, which must contain "bench", dropped and created anew, and dropped
at the end), runs uvicorn serving graylane.asgi as a subprocess (with `--redis`, also a
`celery -A graylane worker`, both on a Redis prefix of this run's own; without, the jobs run
inside the server as with `make run`), and plays the gateways on loopback in this process:
pull gateways that long-poll `GET /api/v1/gateway-config/` and ack, and push gateways
(HTTP servers that verify the signature and answer the generation they run). Each round
publishes a policy change through the API and measures from just before that request until
the control plane has recorded the last of the acks (the largest `acked_at`).

Printed: p50/p90/p99/max over the measured rounds (percentiles by linear interpolation
between closest ranks, as statistics.quantiles(method="inclusive"); with a warning when the
p99 rests on the maximum, i.e. fewer than 101 rounds), the server's CPU time (user + sys of
its process group, from /proc) per publish over the measured rounds, the worker's when one
runs, and this process's; then one bare keep-alive HTTP round trip on loopback measured in
the same run (the floor). The last line is the figure, p99, and its ratio to the floor; the
target is p99 <= 50 ms over >= 100 publishes with 25 + 25 gateways.

Everything it makes is removed at the end, also after an error or Ctrl-C: the temporary
directory (SQLite file, logs, beat schedule), the child processes, the Redis keys under its
prefix, the PostgreSQL database.
"""

import argparse
import asyncio
import functools
import gc
import http.client
import itertools
import json
import os
import signal
import sys
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.measure import (  # noqa: E402
    PERCENTILE_METHOD,
    Clock,
    bench_database_name,
    percentile,
    session_cpu_seconds,
    summary,
    tail_warning,
)
from bench.servers import (  # noqa: E402
    bench_run,
    close_django_connections,
    read_message,
)
from testing.fakes.receiver import PushGateway  # noqa: E402
from testing.processes import AsgiServer, CeleryWorker, django_env  # noqa: E402

TARGET_P99_MS = 50.0
ACK_TIMEOUT = 30.0
IDLE_SECONDS = 3.0


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--publishes", type=int, help="measured rounds (200; --quick: 20)")
    parser.add_argument("--quick", action="store_true", help="20 measured rounds")
    parser.add_argument("--warmup", type=int, default=5, help="rounds not measured (5)")
    parser.add_argument("--pull", type=int, default=25, help="pull gateways (25)")
    parser.add_argument("--push", type=int, default=25, help="push gateways (25)")
    parser.add_argument(
        "--database",
        help="postgres://user@host:port/NAME, NAME containing 'bench' (dropped, created, "
        "dropped at the end); default: a temporary SQLite file",
    )
    parser.add_argument(
        "--redis", help="redis://... (a celery worker runs the jobs); default: no Redis"
    )
    args = parser.parse_args()
    if args.publishes is None:
        args.publishes = 20 if args.quick else 200
    if args.publishes < 1 or args.warmup < 0:
        parser.error("--publishes must be at least 1 and --warmup at least 0")
    if args.pull < 0 or args.push < 0 or args.pull + args.push < 1:
        parser.error("--pull and --push must not be negative, and not both 0")
    if args.database:
        if urlsplit(args.database).scheme not in ("postgres", "postgresql"):
            parser.error("--database takes a postgres:// URL")
        bench_database_name(args.database)  # refuses any other name, before anything is made
    return args


@functools.cache
def project() -> SimpleNamespace:
    """All this bench uses of the project's apps, in one place (when something moves, fix it
    here). Imported once Django is set up. (The tests' helpers it borrows, which need no
    Django, are imported at the top.)"""
    from accounts.models import ApiToken
    from accounts.roles import OPERATOR
    from gateways import signing
    from gateways.models import Gateway, Generation

    return SimpleNamespace(
        ApiToken=ApiToken,
        OPERATOR=OPERATOR,
        signing=signing,
        Gateway=Gateway,
        Generation=Generation,
    )


# -- the floor ---------------------------------------------------------------------------------


def floor_round_trips_ms(requests: int = 2000) -> list[float]:
    """Bare keep-alive HTTP/1.1 round trips on loopback (a stdlib server thread), in ms."""

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
    try:
        for _ in range(requests):
            started = time.perf_counter()
            connection.request("GET", "/")
            connection.getresponse().read()
            samples.append((time.perf_counter() - started) * 1000)
    finally:
        connection.close()
        server.shutdown()
        server.server_close()
    return samples


# -- the gateways, in this process -------------------------------------------------------------


def loopback_push_gateway():
    """A push gateway served by asyncio in this process (the tests' PushReceiver uses
    threads; 25 of them would compete with the pull gateways for this process's GIL)."""
    p = project()
    header = p.signing.HEADER.lower()

    class LoopbackPushGateway(PushGateway):
        async def start(self) -> "LoopbackPushGateway":
            self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
            self.url = f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"
            return self

        def close(self) -> None:
            self.server.close()

        async def _serve(self, reader, writer) -> None:
            try:
                while True:  # keep-alive: one request after the other
                    _, headers, body = await read_message(reader)
                    status, answer = self.receive(headers.get(header, ""), body)
                    writer.write(
                        b"HTTP/1.1 %d -\r\nContent-Type: application/json\r\n"
                        b"Content-Length: %d\r\n\r\n%s" % (status, len(answer), answer)
                    )
                    await writer.drain()
            except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
                writer.close()  # cancelled: the run is over (a connection's own task)

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


def make_gateways(pull: int, push_gateways) -> tuple[list[tuple[str, str]], str]:
    """The pull and push gateways and an operator; returns the pull gateways' (name, token)
    and the operator's API token."""
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group

    p = project()
    pull_gateways = []
    for n in range(pull):
        gateway, token, _ = p.Gateway.objects.create_with_credentials(name=f"pull-{n}")
        pull_gateways.append((gateway.name, token))
    for n, push in enumerate(push_gateways):
        _, _, push.secret = p.Gateway.objects.create_with_credentials(
            name=f"push-{n}", mode=p.Gateway.PUSH, endpoint=push.url + "/graylane"
        )
    operator = get_user_model().objects.create_user("bench-operator")
    operator.groups.add(Group.objects.get(name=p.OPERATOR))
    return pull_gateways, p.ApiToken.objects.issue(operator)[1]


def newest_generation() -> int:
    # Read only: making the first generation here would queue deliveries in this process.
    generations = project().Generation.objects.order_by("-number")
    return generations.values_list("number", flat=True).first() or 0


def all_acked_at(number: int, gateways: int) -> float | None:
    """When the control plane recorded the last ack of `number`, once all gateways have it."""
    from django.db.models import Count, Max

    acked = (
        project()
        .Gateway.objects.filter(acked_generation__gte=number)
        .aggregate(n=Count("pk"), last=Max("acked_at"))
    )
    return acked["last"].timestamp() if acked["n"] == gateways else None


# -- the rounds --------------------------------------------------------------------------------


async def rounds(port: int, pull, operator_key: str, gateways: int, percents) -> list[float]:
    """One round per value of `percents`: publish it, wait for every gateway's ack."""
    from asgiref.sync import sync_to_async

    known = await sync_to_async(newest_generation)()
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
            deadline = time.monotonic() + ACK_TIMEOUT
            while (done := await sync_to_async(all_acked_at)(number, gateways)) is None:
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"generation {number} not acked by all {gateways} in {ACK_TIMEOUT:g} s"
                    )
                await asyncio.sleep(0.02)  # when to stop waiting, not what is measured
            latencies.append((done - started) * 1000)
    finally:
        operator.close()
        for poller in pollers:
            poller.cancel()
        await asyncio.gather(*pollers, return_exceptions=True)
    return latencies


@dataclass
class Result:
    latencies: list[float]
    elapsed: Clock  # this process, over the measured rounds
    server_cpu: float  # seconds, over the measured rounds
    worker_cpu: float | None
    server_idle: float  # CPU seconds per second with nothing published


async def run(args, database: str, var_dir: str, processes: list) -> Result:
    """Gateways, server (and worker), warm-up rounds, measured rounds. Appends the child
    processes to `processes` before starting them, so that the caller can stop them too."""
    from asgiref.sync import sync_to_async

    gateways = args.pull + args.push
    push_gateways = [await loopback_push_gateway().start() for _ in range(args.push)]
    pull, operator_key = await sync_to_async(make_gateways)(args.pull, push_gateways)
    extra = {"REDIS_URL": args.redis} if args.redis else {"IN_PROCESS_JOBS": "true"}
    env = django_env(
        database, REDIS_PREFIX=os.environ["REDIS_PREFIX"], GRAYLANE_VAR_DIR=var_dir, **extra
    )
    worker = CeleryWorker(env) if args.redis else None
    server = AsgiServer(env)
    processes += [worker, server] if worker else [server]
    # Each round sets another percent than the round before (1..99, round and round), so
    # each publish is a real change.
    percents = (1 + n % 99 for n in itertools.count())
    try:
        for process in processes:
            await asyncio.to_thread(process.start)
        port = urlsplit(server.url).port
        await rounds(port, pull, operator_key, gateways, itertools.islice(percents, args.warmup))
        # This process plays the gateways: a full garbage collection of its Django heap
        # (40-70 ms here) would hold up their answers and be measured as the control plane's.
        gc.freeze()
        # What the server burns with nothing to do (its periodic jobs), for comparison.
        idle_start = session_cpu_seconds(server.popen.pid)
        await asyncio.sleep(IDLE_SECONDS)
        server_idle = (session_cpu_seconds(server.popen.pid) - idle_start) / IDLE_SECONDS
        start = Clock.now()
        server_start = session_cpu_seconds(server.popen.pid)
        worker_start = session_cpu_seconds(worker.popen.pid) if worker else 0.0
        latencies = await rounds(
            port, pull, operator_key, gateways, itertools.islice(percents, args.publishes)
        )
        server_cpu = session_cpu_seconds(server.popen.pid) - server_start
        worker_cpu = session_cpu_seconds(worker.popen.pid) - worker_start if worker else None
        elapsed = Clock.now().since(start)
        return Result(latencies, elapsed, server_cpu, worker_cpu, server_idle)
    finally:
        for process in reversed(processes):
            await asyncio.to_thread(process.stop)
        for push in push_gateways:
            push.close()
        await sync_to_async(close_django_connections)()


def _raise_keyboard_interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def main() -> None:
    args = parse_args()
    # SIGTERM cleans up like Ctrl-C does.
    signal.signal(signal.SIGTERM, _raise_keyboard_interrupt)
    try:
        database, result, floor = measure(args)
    except KeyboardInterrupt:
        print("interrupted: stopped the processes, removed what the run made", file=sys.stderr)
        sys.exit(130)
    report(args, database, result, floor)


def measure(args) -> tuple[str, Result, list[float]]:
    """The run, with everything it makes removed again, whatever happens."""
    with bench_run("propagation", args.database, args.redis) as bench:
        database = bench.database
        result = asyncio.run(run(args, database, bench.var_dir, bench.processes))
        floor = floor_round_trips_ms()
    return database, result, floor


def report(args, database: str, result: Result, floor: list[float]) -> None:
    latencies, gateways, n = result.latencies, args.pull + args.push, len(result.latencies)
    if database.startswith("postgres"):
        backend = f"PostgreSQL ({bench_database_name(database)}, dropped again)"
    else:
        backend = "SQLite (temporary file)"
    jobs = "Redis + a celery worker" if args.redis else "jobs inside the server (no Redis)"
    print(
        f"propagation: {args.pull} pull + {args.push} push gateways on loopback, {backend}, "
        f"{jobs}; {args.warmup} warm-up + {n} measured publishes"
    )
    print(f"percentiles: {PERCENTILE_METHOD}")
    print(f"publish -> all {gateways} acked, {summary(latencies, 'ms')}")
    if warning := tail_warning(latencies, 99):
        print(warning)
    cpu = f"server {result.server_cpu / n * 1000:.1f} ms"
    if result.worker_cpu is not None:
        cpu += f", celery worker {result.worker_cpu / n * 1000:.1f} ms"
    print(
        f"CPU per publish (user + sys over the {n} measured publishes, "
        f"{result.elapsed.wall:.1f} s wall): {cpu}; this process (the {gateways} gateways "
        f"and the bench) {result.elapsed.cpu / n * 1000:.1f} ms"
    )
    print(
        f"server idle (no publishes, no gateway connected, {IDLE_SECONDS:g} s): "
        f"{result.server_idle * 1000:.1f} ms CPU per second, i.e. "
        f"{result.server_idle * result.elapsed.wall / n * 1000:.1f} ms of the server's "
        "per-publish figure at this pace"
    )
    floor_p50 = percentile(floor, 50)
    print(f"bare keep-alive HTTP round trip on loopback (the floor), {summary(floor, 'ms', 3)}")
    p99 = percentile(latencies, 99)
    met = "met" if p99 <= TARGET_P99_MS else "MISSED"
    met = met if n >= 100 else f"not judged, {n} publishes"
    print(
        f"p99 publish -> {gateways} gateways acked: {p99:.1f} ms (target <= {TARGET_P99_MS:g} ms "
        f"over >= 100 publishes: {met}); vs the floor's p50 {floor_p50:.3f} ms: "
        f"{p99 / floor_p50:,.0f}x"
    )


if __name__ == "__main__":
    main()
