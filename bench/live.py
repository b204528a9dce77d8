"""Gateways' samples -> browsers: N simulated gateways post metrics every second while M
websocket clients watch; how many samples the control plane ingests, what each costs it in
CPU, and how long a sample takes from its POST to the clients that subscribed to it.

Run:  .venv/bin/python bench/live.py [--quick] [--seconds 60] [--gateways 50] [--clients 100]
                                     [--services 2] [--versions 2] [--lanes 0] [--instances 0]
                                     [--redis URL]
                                     [--database postgres://.../NAME]

It makes its own database (a SQLite file in a temporary directory; or with `--database
postgres://.../NAME`, NAME, which must contain "bench", dropped and created anew, and dropped
at the end), runs uvicorn serving graylane.asgi as a subprocess (with `--redis`, also a
`celery -A graylane worker --beat`, which publishes the live figures every second, both on a
Redis prefix of this run's own; without, the jobs run inside the server as with `make run`).
This process plays the gateways and the browsers on loopback: each gateway posts, once a
second at its own offset within the second, one sample per (service, version) for the
second before (`POST /api/v1/metrics/`, its own token, a kept-alive connection; with
`--lanes N`, one sample per series and lane: none and N lanes of the live document; with
`--instances N`, each sample splits its requests over N instance addresses); the
clients log in once through the login form and open `/ws/live/` with that session cookie,
each subscribed to one service (in turn).

The delay of a sample, for each client subscribed to its service: from just before its POST
until the arrival of the first `metrics` message for its (service, version) whose figures
were read (`at`) after the POST was answered, i.e. that must include it. The floor is the
publishing period: a sample waits for the next once-a-second publication, 0.5 s on
average, so p95 >= 0.95 s whatever the machine. Target: p95 <= 2 s with Redis.

Printed: samples ingested per second, the server's (and worker's) CPU per sample (user + sys
of their process groups, from /proc), POST answer times, the delay percentiles (linear
interpolation between closest ranks), messages per client per second and clients dropped as
too slow. Everything it makes is removed at the end, also after an error or Ctrl-C.
Latest figures: bench/README.md.
"""

import argparse
import asyncio
import bisect
import collections
import json
import math
import os
import random
import re
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx  # noqa: E402
import websockets  # noqa: E402

from bench.measure import (  # noqa: E402
    PERCENTILE_METHOD,
    Clock,
    bench_database_name,
    percentile,
    session_cpu_seconds,
    summary,
)
from bench.servers import (  # noqa: E402
    bench_run,
)
from testing.processes import AsgiServer, CeleryWorker, django_env  # noqa: E402

TARGET_P95_S = 2.0
PUBLISH_PERIOD_S = 1.0
PASSWORD = "bench-viewer-password"
NEVER = 1e9  # the delay of a sample that reached no client
SETTLE_SECONDS = 3.0  # after the last post: the last publications reach the clients


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=int, help="measured seconds of posting (60; --quick: 8)")
    parser.add_argument("--quick", action="store_true", help="8 s, 10 gateways, 20 clients")
    parser.add_argument("--gateways", type=int, help="simulated gateways (50; --quick: 10)")
    parser.add_argument("--clients", type=int, help="websocket clients (100; --quick: 20)")
    parser.add_argument("--services", type=int, default=2, help="services (2)")
    parser.add_argument("--versions", type=int, default=2, help="versions per service (2)")
    parser.add_argument(
        "--lanes", type=int, default=0, help="lanes a series' samples are in, besides none (0)"
    )
    parser.add_argument(
        "--instances", type=int, default=0, help="instances a sample splits its requests by (0)"
    )
    parser.add_argument("--warmup", type=int, default=5, help="seconds posted, not measured (5)")
    parser.add_argument(
        "--redis", help="redis://... (a celery worker publishes); default: no Redis"
    )
    parser.add_argument("--database", help="postgres://.../NAME (NAME contains 'bench')")
    args = parser.parse_args()
    args.seconds = args.seconds or (8 if args.quick else 60)
    args.gateways = args.gateways or (10 if args.quick else 50)
    args.clients = args.clients if args.clients is not None else (20 if args.quick else 100)
    if min(args.seconds, args.gateways, args.services, args.versions) < 1 or args.clients < 0:
        parser.error("--seconds, --gateways, --services and --versions must be at least 1")
    if args.lanes < 0 or args.instances < 0:
        parser.error("--lanes and --instances must be at least 0")
    if args.database:
        if urlsplit(args.database).scheme not in ("postgres", "postgresql"):
            parser.error("--database takes a postgres:// URL")
        bench_database_name(args.database)
    return args


def split(total: int, instances: int) -> list[dict]:
    """`total` requests spread over `instances` addresses, as a gateway tells them."""
    share, rest = divmod(total, instances)
    return [
        {"address": f"10.9.0.{n + 1}:8080", "total": share + (n < rest), "errors": 0}
        for n in range(instances)
    ]


def make_fleet(gateways: int, services: list[str], lanes: list[str]) -> list[tuple[str, str]]:
    """(name, token) of each gateway, and a viewer whose password the clients log in with.
    The services are registered, the lanes made, and every gateway runs the document
    holding them (it may report only services it fronts)."""
    from django.contrib.auth.models import Group, User
    from django.utils import timezone

    from gateways import generation
    from gateways.models import Gateway
    from policy.services import create_lane
    from registry_sync.models import Service

    viewer = User.objects.create_user("bench-viewer", password=PASSWORD)
    viewer.groups.add(Group.objects.get_or_create(name="viewer")[0])
    Service.objects.bulk_create([Service(name=name) for name in services])
    for lane in lanes:
        create_lane(lane, {"priority": 100, "members": {}}, actor="bench", source="api")
    acked = generation.bump("bench services")
    return [
        (
            name,
            Gateway.objects.create_with_credentials(
                name=name, mode=Gateway.PULL, acked_generation=acked, last_seen=timezone.now()
            )[1],
        )
        for name in (f"gw-{n}" for n in range(gateways))
    ]


def login(base_url: str) -> str:
    """The session cookie of the viewer, through the login form (CSRF included)."""
    with httpx.Client(base_url=base_url, follow_redirects=False) as client:
        page = client.get("/accounts/login/")
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
        assert token, "no CSRF token on the login page"
        answer = client.post(
            "/accounts/login/",
            data={
                "username": "bench-viewer",
                "password": PASSWORD,
                "csrfmiddlewaretoken": token.group(1),
            },
            headers={"Referer": base_url + "/accounts/login/"},
        )
        assert answer.status_code == 302, (answer.status_code, answer.text[:300])
        return f"sessionid={client.cookies['sessionid']}"


@dataclass
class Post:
    started: float
    answered: float
    samples: int
    accepted: int


@dataclass
class Client:
    service: str
    # (service, version) -> [(at, arrival)] of its metrics messages, in arrival order.
    seen: dict[tuple[str, str], list[tuple[float, float]]] = field(default_factory=dict)
    closed: int | None = None


async def gateway(
    base_url, name, token, series, lanes, instances, stop_at, measure_from, posts, failures
) -> None:
    offset = random.random()
    headers = {"Authorization": f"Token {token}"}
    async with httpx.AsyncClient(base_url=base_url, headers=headers, timeout=30) as http:
        while True:
            now = time.time()
            next_post = math.floor(now - offset) + 1 + offset
            if next_post >= stop_at:
                return
            await asyncio.sleep(next_post - now)
            second = int(next_post) - 1
            total = random.randint(50, 150)
            samples = [
                {
                    "service": service,
                    "version": version,
                    "ts": second,
                    "window_s": 1,
                    "total": total,
                    "errors": random.randint(0, 2),
                    "latency_ms_p95": round(random.uniform(5, 40), 1),
                    **({"lane": lane} if lane else {}),
                    **({"instances": split(total, instances)} if instances else {}),
                }
                for service, version in series
                for lane in [None, *lanes]
            ]
            started = time.time()
            try:
                answer = await http.post(
                    "/api/v1/metrics/", json={"gateway": name, "samples": samples}
                )
            except httpx.HTTPError as exc:
                failures.append(type(exc).__name__)
                continue
            answered = time.time()
            if answer.status_code != 202:
                failures.append(str(answer.status_code))
                continue
            if started >= measure_from:
                posts.append(
                    (
                        [tuple(s) for s in series],
                        Post(started, answered, len(samples), answer.json()["accepted"]),
                    )
                )


async def browser(ws_url, origin, cookie, client: Client, ready: asyncio.Event, counter) -> None:
    async with websockets.connect(
        ws_url, additional_headers={"Cookie": cookie, "Origin": origin}, max_queue=None
    ) as socket:
        await socket.send(json.dumps({"subscribe": [client.service]}))
        try:
            async for raw in socket:
                arrival = time.time()
                message = json.loads(raw)
                if message["type"] == "subscribed":
                    counter[0] += 1
                    if counter[0] == counter[1]:
                        ready.set()
                elif message["type"] == "metrics":
                    key = (message["service"], message["version"])
                    client.seen.setdefault(key, []).append((message["at"], arrival))
        except websockets.ConnectionClosed as closed:
            client.closed = closed.rcvd.code if closed.rcvd else None


def delays(posts, clients: list[Client]) -> list[float]:
    """Per (post, series, subscribed client): seconds from the POST to the first message for
    that series read after the POST was answered; a sample no message carried counts as
    never arriving (NEVER), so it cannot make the figures look better."""
    found = []
    watching = [
        (client, {key: [at for at, _ in seen] for key, seen in client.seen.items()})
        for client in clients
        if client.closed is None
    ]
    for series, post in posts:
        for key in series:
            for client, ats in watching:
                if client.service != key[0]:
                    continue
                seen = client.seen.get(key, [])
                index = bisect.bisect_left(ats.get(key, []), post.answered)
                found.append(seen[index][1] - post.started if index < len(seen) else NEVER)
    return found


async def run(args, database: str, var_dir: str, processes: list) -> dict:
    from asgiref.sync import sync_to_async

    services = [f"svc-{n}" for n in range(args.services)]
    lanes = [f"lane-{n}" for n in range(args.lanes)]
    fleet = await sync_to_async(make_fleet)(args.gateways, services, lanes)
    extra = {"REDIS_URL": args.redis} if args.redis else {"IN_PROCESS_JOBS": "true"}
    env = django_env(
        database, REDIS_PREFIX=os.environ["REDIS_PREFIX"], GRAYLANE_VAR_DIR=var_dir, **extra
    )
    worker = CeleryWorker(env, beat=True) if args.redis else None
    server = AsgiServer(env)
    processes += [worker, server] if worker else [server]
    for process in processes:
        await asyncio.to_thread(process.start)
    series = [(s, f"V{v + 1}") for s in services for v in range(args.versions)]
    cookie = await asyncio.to_thread(login, server.url)
    ws_url = server.url.replace("http://", "ws://") + "/ws/live/"
    clients = [Client(services[n % len(services)]) for n in range(args.clients)]
    ready, counter = asyncio.Event(), [0, len(clients)]
    browsers = [
        asyncio.create_task(browser(ws_url, server.url, cookie, c, ready, counter)) for c in clients
    ]
    if clients:
        await asyncio.wait_for(ready.wait(), 60)
    posts: list = []
    failures: list[str] = []
    begin = time.time()
    measure_from = begin + args.warmup
    stop_at = measure_from + args.seconds
    gateways = [
        asyncio.create_task(
            gateway(
                server.url,
                name,
                token,
                series,
                lanes,
                args.instances,
                stop_at,
                measure_from,
                posts,
                failures,
            )
        )
        for name, token in fleet
    ]
    await asyncio.sleep(measure_from - time.time())
    start = Clock.now()
    server_start = session_cpu_seconds(server.pid)
    worker_start = session_cpu_seconds(worker.popen.pid) if worker else 0.0
    await asyncio.gather(*gateways)
    server_cpu = session_cpu_seconds(server.pid) - server_start
    worker_cpu = session_cpu_seconds(worker.popen.pid) - worker_start if worker else None
    elapsed = Clock.now().since(start)
    await asyncio.sleep(SETTLE_SECONDS)
    for task in browsers:
        task.cancel()
    await asyncio.gather(*browsers, return_exceptions=True)
    return {
        "posts": posts,
        "clients": clients,
        "elapsed": elapsed,
        "server_cpu": server_cpu,
        "worker_cpu": worker_cpu,
        "measured": (measure_from, stop_at),
        "failures": failures,
    }


def measure(args) -> tuple[str, dict]:
    with bench_run("live", args.database, args.redis) as bench:
        database = bench.database
        result = asyncio.run(run(args, database, bench.var_dir, bench.processes))
    return database, result


def report(args, database: str, result: dict) -> None:
    posts, clients, elapsed = result["posts"], result["clients"], result["elapsed"]
    backend = (
        f"PostgreSQL ({bench_database_name(database)}, dropped again)"
        if database.startswith("postgres")
        else "SQLite (temporary file)"
    )
    jobs = "Redis + a celery worker (beat)" if args.redis else "jobs inside the server (no Redis)"
    samples = sum(post.samples for _, post in posts)
    accepted = sum(post.accepted for _, post in posts)
    print(
        f"live: {args.gateways} gateways x {args.services * args.versions} series "
        f"x {args.lanes + 1} lane{'s' if args.lanes else ''}"
        f"{f' x {args.instances} instances' if args.instances else ''} posting every "
        f"second, {len(clients)} websocket clients; {backend}, {jobs}; "
        f"{args.warmup} s warm-up + {args.seconds} s measured"
    )
    print(f"percentiles: {PERCENTILE_METHOD}")
    first, last = result["measured"]
    print(
        f"ingested: {accepted} of {samples} samples in {len(posts)} posts started in the "
        f"{last - first:.0f} s measured, {accepted / (last - first):.0f} samples/s "
        f"({len(posts) / (last - first):.1f} posts/s)"
    )
    cpu = f"server {result['server_cpu'] / max(accepted, 1) * 1e6:.0f} µs"
    if result["worker_cpu"] is not None:
        cpu += f" + celery worker {result['worker_cpu'] / max(accepted, 1) * 1e6:.0f} µs"
    busy = (result["server_cpu"] + (result["worker_cpu"] or 0)) / elapsed.wall
    print(
        f"CPU per sample (user + sys over {elapsed.wall:.1f} s wall, to the last answer): "
        f"{cpu}; "
        f"server side busy {busy:.0%} of one core; this process (gateways + clients) "
        f"{elapsed.cpu / elapsed.wall:.0%} of one core"
    )
    answers = [(post.answered - post.started) * 1000 for _, post in posts]
    print(f"POST /api/v1/metrics/ answered, {summary(answers, 'ms')}")
    if result["failures"]:
        counts = collections.Counter(result["failures"])
        print(f"FAILED posts (not counted above): {dict(counts)}")
    dropped = sum(1 for c in clients if c.closed is not None)
    if clients:
        arrived_then = sum(
            1 for c in clients for seen in c.seen.values() for _, at in seen if first <= at < last
        )
        per_client = arrived_then / len(clients) / (last - first)
        print(f"metrics messages per client: {per_client:.1f}/s; clients dropped: {dropped}")
        found = delays(posts, clients)
        never = sum(1 for d in found if d == NEVER)
        arrived = [d for d in found if d != NEVER] or [NEVER]
        print(f"post -> clients, {summary(arrived, 's', 3)}; never arrived: {never}")
        floor = f"the floor (one publication a second) is p95 {0.95 * PUBLISH_PERIOD_S:.2f} s"
        p95 = percentile(found, 95)
        met = "met" if p95 <= TARGET_P95_S else "MISSED"
        print(
            f"p95 post -> {len(clients)} clients: {p95:.3f} s (target <= {TARGET_P95_S:g} s "
            f"{'with Redis' if args.redis else 'is for Redis; this run has none'}: {met}); "
            f"{floor}: {p95 / (0.95 * PUBLISH_PERIOD_S):.2f}x"
        )


def _raise_keyboard_interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def main() -> None:
    args = parse_args()
    signal.signal(signal.SIGTERM, _raise_keyboard_interrupt)
    try:
        database, result = measure(args)
    except KeyboardInterrupt:
        print("interrupted: stopped the processes, removed what the run made", file=sys.stderr)
        sys.exit(130)
    report(args, database, result)


if __name__ == "__main__":
    main()
