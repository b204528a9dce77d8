"""Server CPU of a fleet's heartbeats to the embedded registry when its Nacos clients send
`username` + `password` on every call (as the Node.js SDK nacos-naming does) against the
same fleet sending an `accessToken` (as nacos-sdk-python and the Java client do after their
login), side by side in one run; and, for what the remembered check saves, `username` +
`password` with EMBEDDED_REGISTRY_PASSWORD_CACHE_SECONDS=0 (every beat pays a password hash).

Run:  .venv/bin/python bench/nacos_auth.py [--quick] [--instances 100] [--seconds 60]
                                           [--interval 5]

A dashboard (uvicorn serving graylane.asgi with the production settings, so Django's real
PBKDF2 password hasher; a fresh SQLite database made by migrate + demo_setup --demo, whose
`demo-fleet` user has the `service` role) is started anew per side. `--instances` instances
register, then each beats every `--interval` s (their start spread over the interval, as a
fleet's are) for `--seconds`; the server's CPU (user + sys of its process session, from
/proc) over that window is divided by the beats sent (a beat the client gave up on after
2 intervals is still worked on by the server). Printed per side: beats answered / sent,
refused or failed, beat latency p50 / p99, server CPU per beat; last, the ratios.
The in-process jobs (registry sync) run on every side alike.

Everything it starts is stopped at the end, also after an error or Ctrl-C.
Latest figures: bench/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx  # noqa: E402

from bench.measure import session_cpu_seconds, summary  # noqa: E402
from testing.demo_processes import FLEET_PASSWORD, FLEET_USER, fresh_env, manage  # noqa: E402
from testing.processes import AsgiServer  # noqa: E402

SERVICE = "bench-app"
SIDES = ("password", "password, no cache", "accessToken")


@dataclass
class Side:
    name: str
    sent: int = 0
    failed: int = 0
    latencies_ms: list[float] = field(default_factory=list)
    cpu_s: float = 0.0

    @property
    def answered(self) -> int:
        return len(self.latencies_ms)


def server_env(var_dir: Path, side: str) -> dict[str, str]:
    cache = "0" if side == "password, no cache" else "60"
    return {**fresh_env(var_dir), "EMBEDDED_REGISTRY_PASSWORD_CACHE_SECONDS": cache}


async def credentials(client: httpx.AsyncClient, side: str) -> dict[str, str]:
    if side != "accessToken":
        return {"username": FLEET_USER, "password": FLEET_PASSWORD}
    login = await client.post(
        "/nacos/v1/auth/login", data={"username": FLEET_USER, "password": FLEET_PASSWORD}
    )
    login.raise_for_status()
    return {"accessToken": login.json()["accessToken"]}


async def fleet(url: str, side: Side, args: argparse.Namespace, started: asyncio.Event) -> None:
    limits = httpx.Limits(max_connections=args.instances, max_keepalive_connections=args.instances)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=args.interval * 2) as client:
        auth = await credentials(client, side.name)

        async def instance(n: int, until: float) -> None:
            port = 20000 + n
            beat = {"serviceName": f"DEFAULT_GROUP@@{SERVICE}", "ip": "127.0.0.1", "port": port,
                    "cluster": "DEFAULT", "weight": 1.0, "metadata": {}}  # fmt: skip
            await asyncio.sleep(args.interval * n / args.instances)
            next_beat = time.monotonic()
            while next_beat < until:
                side.sent += 1
                begin = time.perf_counter()
                try:
                    answer = await client.put(
                        "/nacos/v1/ns/instance/beat",
                        params={"serviceName": SERVICE, **auth},
                        data={"beat": json.dumps(beat)},
                    )
                    if answer.status_code == 200:
                        side.latencies_ms.append((time.perf_counter() - begin) * 1000)
                    else:
                        side.failed += 1
                except httpx.HTTPError:
                    side.failed += 1
                next_beat += args.interval
                await asyncio.sleep(max(0.0, next_beat - time.monotonic()))

        # The first beat of each registers it (Nacos' beat with beat info); not measured.
        warm = time.monotonic() + args.interval
        await asyncio.gather(*(instance(n, warm) for n in range(args.instances)))
        side.sent = side.failed = 0
        side.latencies_ms.clear()
        started.set()
        until = time.monotonic() + args.seconds
        await asyncio.gather(*(instance(n, until) for n in range(args.instances)))


def per_beat(side: Side) -> float:
    """Server CPU seconds per beat sent."""
    return side.cpu_s / max(side.sent, 1)


def run_side(var_dir: Path, name: str, args: argparse.Namespace) -> Side:
    side = Side(name)
    with AsgiServer(server_env(var_dir, name)) as server:
        assert server.popen is not None

        async def measured() -> None:
            started = asyncio.Event()
            task = asyncio.create_task(fleet(server.url, side, args, started))
            await started.wait()
            cpu_before = session_cpu_seconds(server.popen.pid)
            await task
            side.cpu_s = session_cpu_seconds(server.popen.pid) - cpu_before

        asyncio.run(measured())
    return side


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="20 s per side")
    parser.add_argument("--instances", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--interval", type=float, default=5.0)
    args = parser.parse_args()
    if args.quick:
        args.seconds = 20.0
    var_dir = Path(tempfile.mkdtemp(prefix="graylane-bench-nacos-auth-"))
    try:
        manage(var_dir, "migrate", "--noinput")
        manage(var_dir, "demo_setup", "--demo")
        print(f"{args.instances} instances beating every {args.interval:g} s for "
              f"{args.seconds:g} s per side; load average {os.getloadavg()[0]:.1f}")  # fmt: skip
        sides = [run_side(var_dir, name, args) for name in SIDES]
    finally:
        shutil.rmtree(var_dir, ignore_errors=True)
    for side in sides:
        latency = summary(side.latencies_ms, "ms") if side.latencies_ms else "none answered"
        cpu = f"server CPU {side.cpu_s:.2f} s, {per_beat(side) * 1000:.3f} ms per beat"
        print(f"{side.name:>20}: {side.answered}/{side.sent} beats answered, "
              f"{side.failed} refused or failed; latency {latency}; {cpu}")  # fmt: skip
    password, uncached, token = sides

    print(f"CPU per beat: password / accessToken {per_beat(password) / per_beat(token):.2f}x; "
          f"no cache / password {per_beat(uncached) / per_beat(password):.1f}x; "
          f"load average {os.getloadavg()[0]:.1f}")  # fmt: skip


if __name__ == "__main__":
    main()
