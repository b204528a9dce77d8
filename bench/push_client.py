"""Pushing a generation to many gateways: gateways/push.py (hand-written: asyncio protocol +
httptools over kept-alive sockets) against the same over an aiohttp ClientSession with a
kept-alive connector (below), side by side in one run.

Run:  .venv/bin/pip install -r requirements-dev.txt   # aiohttp: only the benches need it
      .venv/bin/python bench/push_client.py [--gateways 50] [--rounds 200] [--runs 3]
                                            [--warmup 10] [--body-kb 8]

N loopback receivers run in a child process (asyncio, uvloop; they answer `{"generation":
N}` like a gateway, without checking the signature), so this process does the clients' work
only. A round pushes one signed document (`--body-kb`) to all N at once, at most 32 at a
time (GATEWAY_PUSH_CONCURRENCY's default), each client on a uvloop loop of its own with its
connections kept from round to round, as gateways.delivery does, and this process's heap
frozen after warming up, as the server's and the worker's are (graylane/long_lived.py).
Printed per run and client: p50 and p99 of a round's wall time (measure.percentile, with
its warning when the p99 rests on the largest rounds), and this process's CPU per push;
medians (p50 of the runs), then the ratio aiohttp / hand-written last (above 1: aiohttp is
slower or costs more).
Latest figures: bench/README.md.
"""

import argparse
import asyncio
import gc
import json
import os
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.measure import BENCH_SECRET_KEYS, Clock, percentile, tail_warning  # noqa: E402
from bench.servers import read_message  # noqa: E402

CONCURRENCY = 32

# The receivers' process.


async def _serve_receivers(count: int) -> None:
    async def answer(reader, writer):
        try:
            while True:
                _, headers, _ = await read_message(reader)
                body = b'{"generation": %s}' % headers["x-graylane-generation"].encode()
                writer.write(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                    b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
                )
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    servers = [await asyncio.start_server(answer, "127.0.0.1", 0) for _ in range(count)]
    print(json.dumps([s.sockets[0].getsockname()[1] for s in servers]), flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)  # until closed


# The candidate: what gateways/push.py's push() does, over an aiohttp ClientSession.


def aiohttp_client():
    """(loop, push(gateway, snapshot), close): bench/stock.py's AiohttpPushes, the client
    `bench/propagation.py --stock aiohttp` puts in the server, on a uvloop loop of its own."""
    from bench.stock import AiohttpPushes

    pushes = AiohttpPushes()
    return pushes.event_loop(), pushes.push, pushes.close


def handwritten_client():
    """gateways/push.py itself; its loop (this thread's) made anew for the run."""
    from gateways import push

    push._local.__dict__.clear()
    loop = push.event_loop()

    def close():
        for connections in push._local.pool._idle.values():
            for connection in connections:
                connection.close()
        loop.run_until_complete(asyncio.sleep(0))

    return loop, push.push, close


# The measurement.


def measure(client, gateways, rounds: int, warmup: int, body_kb: int):
    """(round wall times in ms, µs of this process's CPU per push)."""
    from gateways.generation import Snapshot

    loop, push, close = client()
    padding = "x" * (body_kb * 1024)

    async def one_round(number: int) -> float:
        body = json.dumps({"generation": number, "padding": padding}).encode()
        snapshot = Snapshot(number, datetime.now(UTC), body)
        at_once = asyncio.Semaphore(CONCURRENCY)

        async def one(gateway):
            async with at_once:
                return await push(gateway, snapshot)

        started = time.perf_counter()
        applied = await asyncio.gather(*(one(gateway) for gateway in gateways))
        elapsed = (time.perf_counter() - started) * 1000
        assert applied == [number] * len(gateways), applied
        return elapsed

    for number in range(1, warmup + 1):
        loop.run_until_complete(one_round(number))
    # As the server and worker do once started (graylane/long_lived.py): a full collection of
    # this process's Django heap would be measured as the client's.
    gc.collect()
    gc.freeze()
    times = []
    start = Clock.now()
    for number in range(warmup + 1, warmup + 1 + rounds):
        times.append(loop.run_until_complete(one_round(number)))
    elapsed = Clock.now().since(start)
    close()
    loop.close()
    return times, elapsed.cpu / (rounds * len(gateways)) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gateways", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--body-kb", type=int, default=8, help="size of the document pushed")
    parser.add_argument("--receivers", type=int, help=argparse.SUPPRESS)  # the child process
    args = parser.parse_args()
    if args.receivers:
        import uvloop

        uvloop.run(_serve_receivers(args.receivers))
        return

    try:
        import aiohttp  # noqa: F401
    except ImportError:
        sys.exit("aiohttp is not installed: .venv/bin/pip install -r requirements-dev.txt")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "graylane.settings")
    os.environ.setdefault("SECRET_KEY", "bench-only-secret-key-long-enough-for-django-checks-0123")
    os.environ.setdefault("GRAYLANE_SECRET_KEYS", BENCH_SECRET_KEYS)
    import django

    django.setup()
    from gateways.models import Gateway

    receivers = subprocess.Popen(
        [sys.executable, __file__, "--receivers", str(args.gateways)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        ports = json.loads(receivers.stdout.readline())
        gateways = [
            Gateway(
                name=f"gw-{n}",
                mode=Gateway.PUSH,
                endpoint=f"http://127.0.0.1:{port}/graylane/config",
                push_secret="bench-only",
            )
            for n, port in enumerate(ports)
        ]
        clients = {"hand-written": handwritten_client, "aiohttp": aiohttp_client}
        print(
            f"{args.gateways} loopback receivers, {args.rounds} rounds of one push to each "
            f"({args.body_kb} KiB), at most {CONCURRENCY} at once"
        )
        summary: dict[str, list[tuple[float, float, float]]] = {name: [] for name in clients}
        for run in range(1, args.runs + 1):
            for name in list(clients) if run % 2 else list(clients)[::-1]:
                times, cpu = measure(
                    clients[name], gateways, args.rounds, args.warmup, args.body_kb
                )
                p50, p99 = percentile(times, 50), percentile(times, 99)
                summary[name].append((p50, p99, cpu))
                print(
                    f"run {run} {name:12s} round p50 {p50:6.2f} ms  p99 {p99:6.2f} ms  "
                    f"CPU {cpu:5.0f} µs/push",
                    flush=True,
                )
                # Once: it is the same for every run and client (the same number of rounds).
                if run == 1 and name == "hand-written" and (warning := tail_warning(times)):
                    print(f"{warning} (a sample: one round, --rounds)")
    finally:
        receivers.stdin.close()
        receivers.wait(10)
    medians = {
        name: [percentile([r[i] for r in rows], 50) for i in range(3)]
        for name, rows in summary.items()
    }
    for name, (p50, p99, cpu) in medians.items():
        print(
            f"median {name:12s} round p50 {p50:6.2f} ms  p99 {p99:6.2f} ms  CPU {cpu:5.0f} µs/push"
        )
    ours, lib = medians["hand-written"], medians["aiohttp"]
    print(
        f"ratio aiohttp / hand-written: round p50 {lib[0] / ours[0]:.2f}, "
        f"p99 {lib[1] / ours[1]:.2f}, CPU per push {lib[2] / ours[2]:.2f}"
    )


if __name__ == "__main__":
    main()
