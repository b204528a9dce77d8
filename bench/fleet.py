"""Thousands of pull gateways against two dashboard replicas: publish -> every gateway acked,
the server CPU each publish costs per gateway as the fleet grows, and metrics ingestion
(each gateway posting every second) until the replicas saturate.

Run:  .venv/bin/python bench/fleet.py --database postgres://.../NAME --redis URL
                                      [--sizes 1000,2000,5000] [--publishes 110] [--warmup 3]
                                      [--processes 4] [--metrics 100,250,...,5000]
                                      [--metrics-seconds 10] [--quick]
                                      [--acks poll,post] [--servers uvicorn,granian]

Two replicas (uvicorn; or each of `--servers`) serve graylane.asgi on one PostgreSQL
database (NAME must contain "bench": dropped, created anew, dropped at the end) and one
Redis (a prefix of this run's own; a generation made by one replica wakes the other's long
polls over Redis pub/sub). The gateways are simulated, several hundred per process in
`--processes` processes on uvloop: each long-polls `GET
/api/v1/gateway-config/?known=N&wait=30` on a keep-alive connection of its own and acks what
it gets (bench/propagation.py's PullGateway: plain asyncio streams, so the load generator's
cost stays small beside the server's), half of them on each replica. `--acks`: how they ack,
each measured in turn at every size, back to back: `poll` with the next poll (`&applied=N`,
as the project's gateways do), `post` to `POST /api/v1/gateways/{name}/ack/` (one HTTP
exchange more per generation: as before `applied`). `--servers`: the ASGI servers compared,
a pair of replicas each (all four on the servers' core), measured in turn at every size and
ack: `uvicorn` (the project's) and `granian` (Rust HTTP, `--interface asginl`; measured
only, not a dependency: `pip install granian` first). The servers run pinned (`taskset`) to
one core, this process and the gateways' processes to the other; PostgreSQL and Redis are
the machine's, unpinned. The soft limit on open files is raised to the hard one (each
gateway holds a connection).

Per fleet size (and ack, and server): `--publishes` policy changes (`PATCH /api/v1/policy/`,
through the pair's first replica), each timed from just before the request until the
database holds the last gateway's ack (the largest `acked_at`), p50/p90/p99/max; the
replicas' CPU time (user + sys, from their own /proc entries) over the measured publishes,
per publish and per gateway per publish, beside the gateways' processes' CPU; the replicas'
resident memory; the load average. Then metrics ingestion (on the first of `--servers`): for
each step of `--metrics`, that many gateways `POST /api/v1/metrics/` one sample each, every
second, for `--metrics-seconds`; the posts answered per second, their p50/p99, the replicas'
CPU per post; the ladder stops at the first step that saturates them (answered < 90 % of
what was sent, p99 > 1 s, or their core busy >= 90 %). Last, the cost per gateway at each
size against the smallest, the targets, and what 50,000 gateways would need at the measured
costs.

Targets (issue 27): 5,000 gateways acked at p99 <= 1 s; the server CPU per gateway per
publish flat (within 20 %) from 1,000 to 5,000. Latest figures: bench/README.md.
"""

import argparse
import asyncio
import json
import os
import random
import resource
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
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
from bench.propagation import (  # noqa: E402
    ACK_TIMEOUT,
    LoopbackClient,
    PullGateway,
    all_acked_at,
    make_operator,
    newest_generation,
    project,
)
from bench.servers import bench_run  # noqa: E402
from testing.processes import AsgiServer, django_env  # noqa: E402

TARGET_P99_MS = 1000.0
TARGET_FLAT = 0.20  # cost per gateway per publish within ±20 % of the smallest size's
SERVICE = "user-app"  # the service the gateways report figures of
IDLE_SECONDS = 5.0
PAUSE_SECONDS = 0.3  # between a round's last ack and the next publish: every gateway re-polls
CONNECT_CHUNK = 200  # gateways connecting at once (uvicorn's listen backlog is 2048)
SATURATED_SHARE = 0.9
SIZING = 50_000
ACKS = ("poll", "post")  # with the next poll (applied=N); to the ack endpoint
SERVERS = ("uvicorn", "granian")


def numbers(value: str) -> list[int]:
    try:
        parsed = [int(part) for part in value.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError("a list of whole numbers, e.g. 1000,2000") from None
    if not parsed or min(parsed) < 1:
        raise argparse.ArgumentTypeError("at least one number, each at least 1")
    return parsed


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database", required=True, help="postgres://.../NAME, NAME with 'bench'")
    parser.add_argument("--redis", required=True, help="redis://... (the replicas' wake-ups)")
    parser.add_argument("--sizes", type=numbers, help="fleet sizes (1000,2000,5000)")
    parser.add_argument("--publishes", type=int, help="measured publishes per size (110)")
    parser.add_argument("--warmup", type=int, default=3, help="publishes not measured (3)")
    parser.add_argument("--processes", type=int, default=4, help="gateways' processes (4)")
    parser.add_argument(
        "--metrics", type=numbers, help="gateways posting metrics, a step each (100,...,5000)"
    )
    parser.add_argument("--metrics-seconds", type=int, help="seconds per metrics step (10)")
    parser.add_argument("--no-metrics", action="store_true", help="leave ingestion out")
    parser.add_argument(
        "--quick", action="store_true", help="sizes 100,200,500, 20 publishes, 5 s steps"
    )
    parser.add_argument(
        "--acks", type=choices(ACKS), default=list(ACKS), help="how gateways ack (poll,post)"
    )
    parser.add_argument(
        "--servers", type=choices(SERVERS), default=["uvicorn"], help="ASGI servers (uvicorn)"
    )
    args = parser.parse_args(argv)
    args.sizes = args.sizes or ([100, 200, 500] if args.quick else [1000, 2000, 5000])
    args.publishes = args.publishes or (20 if args.quick else 110)
    args.metrics_seconds = args.metrics_seconds or (5 if args.quick else 10)
    biggest = max(args.sizes)
    args.metrics = [] if args.no_metrics else (args.metrics or metric_steps(biggest))
    if args.publishes < 1 or args.warmup < 0 or args.processes < 1:
        parser.error("--publishes and --processes must be at least 1, --warmup at least 0")
    if max(args.metrics, default=0) > biggest:
        parser.error(f"--metrics: at most the largest fleet size ({biggest})")
    if urlsplit(args.database).scheme not in ("postgres", "postgresql"):
        parser.error("--database takes a postgres:// URL")
    bench_database_name(args.database)  # refuses any other name, before anything is made
    if len(os.sched_getaffinity(0)) < 2:
        parser.error("needs two cores: one for the servers, one for the load")
    return args


def choices(allowed: tuple[str, ...]):
    def parse(value: str) -> list[str]:
        parsed = [part.strip() for part in value.split(",") if part.strip()]
        if not parsed or not set(parsed) <= set(allowed) or len(set(parsed)) < len(parsed):
            raise argparse.ArgumentTypeError(f"some of {','.join(allowed)}, each once")
        return parsed

    return parse


def metric_steps(biggest: int) -> list[int]:
    """From a hundred gateways up to the whole fleet, roughly doubling."""
    steps = [n for n in (100, 250, 500, 1000, 2000, 3500) if n < biggest]
    return [*steps, biggest]


# -- the gateways' processes ---------------------------------------------------------------------


async def request(client: LoopbackClient, method: str, path: str, body: bytes) -> tuple[int, bytes]:
    """client.request(), on a new connection when the server closed the idle one (uvicorn
    closes a keep-alive connection after 5 s without a request)."""
    try:
        return await client.request(method, path, body)
    except (asyncio.IncompleteReadError, ConnectionError):
        client.close()
        await client.connect()
        return await client.request(method, path, body)


async def worker_poll(spec: dict) -> None:
    """Long-poll and ack with each gateway of `spec` until stopped."""
    tasks = []
    gateways = spec["gateways"]
    for start in range(0, len(gateways), CONNECT_CHUNK):
        for name, token, port in gateways[start : start + CONNECT_CHUNK]:
            gateway = PullGateway(port, name, token, fold_ack=spec["ack"] == "poll")
            tasks.append(asyncio.create_task(gateway.run(spec["known"])))
        await asyncio.sleep(0.05)
    print("ready", flush=True)
    # A gateway that fails ends the process: the round waiting for its ack says which.
    done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
    for task in done:
        task.result()


async def worker_metrics(spec: dict) -> None:
    """Each gateway of `spec` posts one sample a second for spec["seconds"] s, from a random
    moment of the first second; prints the posts' latencies (ms) and answers, as JSON."""
    clients = []
    gateways = spec["gateways"]
    for start in range(0, len(gateways), CONNECT_CHUNK):
        chunk = [
            (LoopbackClient(port, token), name)
            for name, token, port in gateways[start:][:CONNECT_CHUNK]
        ]
        await asyncio.gather(*(client.connect() for client, _ in chunk))
        clients += chunk
    print("ready", flush=True)
    await asyncio.to_thread(sys.stdin.readline)  # "go"
    latencies: list[float] = []
    statuses: dict[str, int] = {}
    loop = asyncio.get_running_loop()
    began = loop.time()

    async def report(client: LoopbackClient, name: str) -> None:
        at = began + random.random()
        for _ in range(spec["seconds"]):
            await asyncio.sleep(max(0.0, at - loop.time()))
            sample = {"service": SERVICE, "version": "V1", "ts": int(time.time()), "window_s": 1}
            sample |= {"total": 100, "errors": 1, "latency_ms_p95": 12.5}
            body = json.dumps({"gateway": name, "samples": [sample]}).encode()
            sent = time.perf_counter()
            status, _ = await request(client, "POST", "/api/v1/metrics/", body)
            latencies.append((time.perf_counter() - sent) * 1000)
            statuses[str(status)] = statuses.get(str(status), 0) + 1
            at += 1.0

    await asyncio.gather(*(report(client, name) for client, name in clients))
    for client, _ in clients:
        client.close()
    print(json.dumps({"latencies": latencies, "statuses": statuses}), flush=True)


def worker_main(spec_file: str) -> None:
    import uvloop

    spec = json.loads(Path(spec_file).read_text())
    run = worker_poll if spec["mode"] == "poll" else worker_metrics
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(run(spec))


class Workers:
    """The gateways' processes: each in a session of its own (its CPU: session_cpu_seconds),
    pinned with this process's affinity (the load's core)."""

    def __init__(self, directory: str, mode: str, gateways: list, processes: int, **spec):
        self.popens: list[subprocess.Popen] = []
        for n in range(min(processes, len(gateways))):
            path = Path(directory) / f"{mode}-{n}.json"
            path.write_text(json.dumps({"mode": mode, "gateways": gateways[n::processes], **spec}))
            self.popens.append(
                subprocess.Popen(
                    [sys.executable, __file__, "--worker", str(path)],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    text=True,
                    start_new_session=True,
                )
            )

    def wait_ready(self) -> None:
        for popen in self.popens:
            assert popen.stdout is not None
            if popen.stdout.readline().strip() != "ready":
                raise RuntimeError(f"a gateways' process did not start (exit {popen.wait()})")

    def cpu_seconds(self) -> float:
        return sum(session_cpu_seconds(popen.pid) for popen in self.popens)

    def go(self) -> list[dict]:
        """Metrics mode: start posting; each process's report once done."""
        for popen in self.popens:
            assert popen.stdin is not None
            popen.stdin.write("go\n")
            popen.stdin.flush()
        reports = []
        for popen in self.popens:
            assert popen.stdout is not None
            line = popen.stdout.readline()
            if not line:
                raise RuntimeError(f"a gateways' process failed (exit {popen.wait()})")
            reports.append(json.loads(line))
        return reports

    def stop(self) -> None:
        for popen in self.popens:
            if popen.poll() is None:
                popen.send_signal(signal.SIGTERM)
        for popen in self.popens:
            try:
                popen.wait(10)
            except subprocess.TimeoutExpired:
                popen.kill()
                popen.wait()


# -- the replicas ------------------------------------------------------------------------------


def replica(env: dict[str, str], core: int, kind: str) -> AsgiServer:
    server = AsgiServer(env)
    if kind == "granian":
        # One worker process, one runtime thread, uvloop (as uvicorn's); no lifespan (as
        # uvicorn's --lifespan off); room for every held long poll (its default admits
        # backlog / workers requests at once, 1,024, and queues the rest).
        server.args = [sys.executable, "-m", "granian", "--interface", "asginl"]
        server.args += ["--host", "127.0.0.1", "--port", str(server.port), "--loop", "uvloop"]
        server.args += ["--workers", "1", "--runtime-threads", "1", "--backlog", "2048"]
        server.args += ["--backpressure", "100000", "graylane.asgi:application"]
    # taskset execs the server: the same pid (and session: granian's worker is counted)
    server.args[:0] = ["taskset", "-c", str(core)]
    return server


def rss_mib(leader: int) -> float:
    """The resident memory of the session `leader` leads (granian serves from a worker
    process of its own: its parent only supervises)."""
    total = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if os.getsid(int(entry.name)) != leader:
                continue
            lines = (entry / "status").read_text().splitlines()
        except (FileNotFoundError, ProcessLookupError):
            continue  # gone meanwhile
        total += sum(int(line.split()[1]) for line in lines if line.startswith("VmRSS:"))
    return total / 1024


def load_average() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def servers_cpu(servers: list[AsgiServer]) -> list[float]:
    return [session_cpu_seconds(server.popen.pid) for server in servers]


# -- the measurements --------------------------------------------------------------------------


@dataclass
class SizeResult:
    server: str  # the replicas' ASGI server
    ack: str  # how the gateways acked: "poll" or "post"
    size: int
    latencies: list[float]
    server_cpu: list[float]  # seconds per replica over the measured publishes
    workers_cpu: float
    idle_cpu: float  # both replicas, CPU seconds per second, fleet connected, nothing published
    rss: list[float]  # MiB per replica, fleet connected
    wall: float
    load: str

    def per_publish_ms(self) -> float:
        return sum(self.server_cpu) / len(self.latencies) * 1000

    def per_gateway_ms(self) -> float:
        return self.per_publish_ms() / self.size

    def label(self) -> str:
        return f"{self.server}, ack by {self.ack}"


@dataclass
class MetricsResult:
    gateways: int
    seconds: int
    latencies: list[float]
    statuses: dict[str, int]
    server_cpu: float
    wall: float
    load: str

    def answered_per_second(self) -> float:
        return len(self.latencies) / self.wall

    def cpu_per_post_ms(self) -> float:
        return self.server_cpu / max(1, len(self.latencies)) * 1000

    def busy(self) -> float:
        return self.server_cpu / self.wall

    def saturated(self) -> bool:
        sent = self.gateways * self.seconds
        return (
            len(self.latencies) < SATURATED_SHARE * sent
            or percentile(self.latencies, 99) > TARGET_P99_MS
            or self.busy() >= SATURATED_SHARE
        )


async def publish(operator: LoopbackClient, percent: int, size: int, among: dict) -> float:
    """One policy change; ms until the last of `size` gateways' acks is recorded."""
    from asgiref.sync import sync_to_async

    change = json.dumps({"percent": percent}).encode()
    started = time.time()
    status, answer = await request(operator, "PATCH", "/api/v1/policy/", change)
    if status != 200:
        raise RuntimeError(f"publishing answered {status}: {answer!r}")
    number = await sync_to_async(newest_generation)()
    deadline = time.monotonic() + ACK_TIMEOUT
    while (done := await sync_to_async(all_acked_at)(number, size, **among)) is None:
        if time.monotonic() > deadline:
            raise RuntimeError(f"generation {number} not acked by all {size} in {ACK_TIMEOUT:g} s")
        await asyncio.sleep(0.02)  # when to stop waiting, not what is measured
    return (done - started) * 1000


async def measure_size(
    args, size, fleet, pair: "Pair", ack: str, directory, percents
) -> SizeResult:
    from asgiref.sync import sync_to_async

    servers, operator = pair.servers, pair.operator
    ports = [urlsplit(server.url).port for server in servers]
    gateways = [(name, token, ports[n % 2]) for n, (name, token) in enumerate(fleet[:size])]
    among = {"name__lt": gateway_name(size)}  # the first `size` (names sort by number)
    known = await sync_to_async(newest_generation)()
    workers = Workers(directory, "poll", gateways, args.processes, known=known, ack=ack)
    try:
        await asyncio.to_thread(workers.wait_ready)
        await asyncio.sleep(1.0)  # the last chunk's first polls reach the replicas
        for _ in range(args.warmup):
            await publish(operator, next(percents), size, among)
            await asyncio.sleep(PAUSE_SECONDS)
        await asyncio.sleep(2.0)  # the last round's re-polls are in: only holding is left
        idle_start = sum(servers_cpu(servers))
        await asyncio.sleep(IDLE_SECONDS)
        idle = (sum(servers_cpu(servers)) - idle_start) / IDLE_SECONDS
        rss = [rss_mib(server.popen.pid) for server in servers]
        load = load_average()
        start, cpu_start = Clock.now(), servers_cpu(servers)
        workers_start = workers.cpu_seconds()
        latencies = []
        for _ in range(args.publishes):
            latencies.append(await publish(operator, next(percents), size, among))
            await asyncio.sleep(PAUSE_SECONDS)
        cpu = [end - begin for end, begin in zip(servers_cpu(servers), cpu_start, strict=True)]
        workers_cpu = workers.cpu_seconds() - workers_start
        wall = Clock.now().since(start).wall
    finally:
        await asyncio.to_thread(workers.stop)
    load += f" -> {load_average()}"
    return SizeResult(pair.kind, ack, size, latencies, cpu, workers_cpu, idle, rss, wall, load)


async def measure_metrics(args, n, fleet, servers, directory) -> MetricsResult:
    ports = [urlsplit(server.url).port for server in servers]
    gateways = [(name, token, ports[i % 2]) for i, (name, token) in enumerate(fleet[:n])]
    seconds = args.metrics_seconds
    workers = Workers(directory, "metrics", gateways, args.processes, seconds=seconds)
    try:
        await asyncio.to_thread(workers.wait_ready)
        load = load_average()
        start, cpu_start = time.perf_counter(), sum(servers_cpu(servers))
        reports = await asyncio.to_thread(workers.go)
        cpu = sum(servers_cpu(servers)) - cpu_start
        wall = time.perf_counter() - start
    finally:
        await asyncio.to_thread(workers.stop)
    latencies = [ms for report in reports for ms in report["latencies"]]
    statuses: dict[str, int] = {}
    for report in reports:
        for status, count in report["statuses"].items():
            statuses[status] = statuses.get(status, 0) + count
    return MetricsResult(n, seconds, latencies, statuses, cpu, wall, f"{load} -> {load_average()}")


def gateway_name(n: int) -> str:
    return f"fleet-{n:05d}"


def make_fleet(size: int) -> tuple[list[tuple[str, str]], str]:
    """The gateways' (name, token), the operator's token, and SERVICE (a known service)."""
    from registry_sync.models import Service

    Service.objects.create(name=SERVICE)
    names = [gateway_name(n) for n in range(size)]
    return project().Gateway.objects.bulk_create_with_credentials(names), make_operator()


@dataclass
class Pair:
    """Two replicas on one ASGI server, and the operator's connection to the first (each
    pair's publishes go through it: their cost is the pair's)."""

    kind: str
    servers: list[AsgiServer]
    operator: LoopbackClient


async def run(args, bench, cores: tuple[int, int]) -> tuple[list, list]:
    from asgiref.sync import sync_to_async

    fleet, operator_key = await sync_to_async(make_fleet)(max(args.sizes))
    env = django_env(
        bench.database,
        REDIS_URL=args.redis,
        REDIS_PREFIX=os.environ["REDIS_PREFIX"],
        GRAYLANE_VAR_DIR=bench.var_dir,
    )
    pairs = []
    for kind in args.servers:
        servers = [replica(env, cores[1], kind), replica(env, cores[1], kind)]
        bench.processes += servers
        for server in servers:
            await asyncio.to_thread(server.start)
        operator = LoopbackClient(urlsplit(servers[0].url).port, operator_key)
        pairs.append(Pair(kind, servers, operator))
        await operator.connect()
    # Each publish sets another percent than the one before (1..99, round and round).
    percents = iter(1 + n % 99 for n in range(10**9))
    # A generation holding SERVICE, which the gateways will ack: then they front it.
    status, answer = await pairs[0].operator.request(
        "PATCH", f"/api/v1/services/{SERVICE}/", json.dumps({"prod_version": "V1"}).encode()
    )
    if status != 200:
        raise RuntimeError(f"making {SERVICE} known answered {status}: {answer!r}")
    sizes, metrics = [], []
    with tempfile.TemporaryDirectory(dir=bench.var_dir) as directory:
        try:
            for size in args.sizes:
                # Each server and ack in turn, back to back: under the same load, as far as
                # a shared machine allows.
                for pair in pairs:
                    for ack in args.acks:
                        result = await measure_size(
                            args, size, fleet, pair, ack, directory, percents
                        )
                        report_size(args, result)
                        sizes.append(result)
            if args.metrics:
                # The gateways acked generations holding SERVICE above: they front it.
                print(
                    f"metrics ingestion ({pairs[0].kind}; {args.metrics_seconds} s a step, "
                    "one sample a post):"
                )
            for n in args.metrics:
                result = await measure_metrics(args, n, fleet, pairs[0].servers, directory)
                report_metrics(result)
                metrics.append(result)
                if result.saturated():
                    break
        finally:
            for pair in pairs:
                pair.operator.close()
    return sizes, metrics


# -- the report ------------------------------------------------------------------------------


def report_size(args, r: SizeResult) -> None:
    n = len(r.latencies)
    a, b = (cpu / n * 1000 for cpu in r.server_cpu)
    print(
        f"{r.size:,} gateways, {r.label()} ({args.processes} processes, half on each "
        f"replica), load {r.load}"
    )
    print(f"  publish -> all {r.size:,} acked, {summary(r.latencies, 'ms')}")
    if warning := tail_warning(r.latencies, 99):
        print(f"  {warning}")
    print(
        f"  server CPU per publish {r.per_publish_ms():.1f} ms (replicas {a:.1f} + {b:.1f}) = "
        f"{r.per_gateway_ms():.3f} ms per gateway; the gateways' processes "
        f"{r.workers_cpu / n * 1000:.1f} ms ({r.workers_cpu / n / r.size * 1e6:.1f} µs per "
        f"gateway); {n} publishes in {r.wall:.1f} s"
    )
    print(
        f"  held, nothing published: replicas {r.idle_cpu * 1000:.1f} ms CPU per second; "
        f"resident {r.rss[0]:.0f} + {r.rss[1]:.0f} MiB",
        flush=True,
    )


def report_metrics(r: MetricsResult) -> None:
    sent = r.gateways * r.seconds
    statuses = ", ".join(f"{status}: {count}" for status, count in sorted(r.statuses.items()))
    print(
        f"  {r.gateways:,} gateways: {len(r.latencies):,} of {sent:,} posts answered "
        f"({r.answered_per_second():,.0f}/s; {statuses}), {summary(r.latencies, 'ms')}; "
        f"replicas {r.cpu_per_post_ms():.3f} ms CPU per post, their core {r.busy():.0%} busy"
        f"{' -> SATURATED' if r.saturated() else ''}; load {r.load}",
        flush=True,
    )


def report_summary(args, sizes: list[SizeResult], metrics: list[MetricsResult]) -> None:
    print(f"percentiles: {PERCENTILE_METHOD}")
    labels = list(dict.fromkeys(r.label() for r in sizes))
    print(
        "size    server, ack           p50 ms   p99 ms   server CPU/publish   per gateway   "
        f"vs smallest   vs {labels[0]}   RSS/gateway"
    )
    first = {r.size: r for r in sizes if r.label() == labels[0]}
    for r in sorted(sizes, key=lambda r: (r.size, labels.index(r.label()))):
        base = next(b for b in sizes if b.label() == r.label())
        extra = ""
        if r.size != base.size:
            kib = (sum(r.rss) - sum(base.rss)) * 1024 / (r.size - base.size)
            extra = f"{kib:8.1f} KiB"
        print(
            f"{r.size:6,}  {r.label():20} {percentile(r.latencies, 50):8.1f} "
            f"{percentile(r.latencies, 99):8.1f} {r.per_publish_ms():15.1f} ms "
            f"{r.per_gateway_ms():10.3f} ms {r.per_gateway_ms() / base.per_gateway_ms():10.2f}x "
            f"{r.per_gateway_ms() / first[r.size].per_gateway_ms():14.2f}x   {extra}"
        )
    for label in labels:
        report_targets([r for r in sizes if r.label() == label])
    if metrics:
        cost = max(m.cpu_per_post_ms() for m in metrics)
        print(
            f"metrics every second ({sizes[0].server}): {SIZING:,} posts/s x {cost:.3f} ms = "
            f"{SIZING * cost / 1000:.1f} cores (the ladder's dearest step)"
        )
        if saturated := [m for m in metrics if m.saturated()]:
            print(f"  the replicas' core saturated at {saturated[0].gateways:,} gateways posting")
        else:
            print(f"  not saturated at {metrics[-1].gateways:,} gateways posting")


def report_targets(sizes: list[SizeResult]) -> None:
    """The targets, and what SIZING gateways would need, for one server and ack."""
    base, last = sizes[0], sizes[-1]
    print(f"{last.label()}:")
    p99 = percentile(last.latencies, 99)
    judged = len(last.latencies) >= 101
    met = ("met" if p99 <= TARGET_P99_MS else "MISSED") if judged else "not judged (< 101)"
    print(
        f"  target: {last.size:,} gateways acked p99 <= {TARGET_P99_MS:g} ms: {p99:.0f} ms, {met}"
    )
    growth = [r.per_gateway_ms() / base.per_gateway_ms() for r in sizes]
    flat = all(abs(g - 1) <= TARGET_FLAT for g in growth)
    print(
        f"  target: CPU per gateway per publish flat within ±{TARGET_FLAT:.0%} from "
        f"{base.size:,} to {last.size:,}: {min(growth):.2f}x-{max(growth):.2f}x, "
        f"{'met' if flat else 'MISSED'}"
    )
    cost = last.per_gateway_ms()
    need = SIZING * cost / 1000
    print(
        f"  {SIZING:,} gateways at the {last.size:,}-gateway cost ({cost:.3f} ms per gateway "
        f"per publish): {need:.1f} CPU-seconds of replicas per publish, i.e. acked within 1 s "
        f"needs >= {need:.0f} replica cores busy for that second (more with headroom)"
    )
    idle = last.idle_cpu / last.size * SIZING
    print(f"  held with nothing published: {idle:.2f} cores (30 s long polls)")


def main() -> None:
    if sys.argv[1:2] == ["--worker"]:
        worker_main(sys.argv[2])
        return
    args = parse_args()
    signal.signal(signal.SIGTERM, _raise_keyboard_interrupt)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    cores = tuple(sorted(os.sched_getaffinity(0))[:2])
    os.sched_setaffinity(0, {cores[0]})  # this process and the gateways' processes
    print(
        f"fleet: two replicas pinned to core {cores[1]}, the load to core {cores[0]}; "
        f"open files: soft limit raised from {soft} to {hard}; PostgreSQL "
        f"({bench_database_name(args.database)}, dropped again) + Redis"
    )
    try:
        with bench_run("fleet", args.database, args.redis) as bench:
            sizes, metrics = asyncio.run(run(args, bench, cores))  # type: ignore[arg-type]
    except KeyboardInterrupt:
        print("interrupted: stopped the processes, removed what the run made", file=sys.stderr)
        sys.exit(130)
    report_summary(args, sizes, metrics)


def _raise_keyboard_interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


if __name__ == "__main__":
    main()
