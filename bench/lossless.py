"""Rolling restart of every instance of a service (3 instances) under steady load through the
gateway: the success rate with the SDK's graceful lifecycle and without it (naive), side by
side in one run, and the latency during the restart.

Run:  .venv/bin/python bench/lossless.py [--quick] [--seconds 60] [--connections 8]
                                         [--runs 1] [--warmup 2]

It starts a dashboard (a fresh SQLite database set up as `make run` sets it up, its embedded
registry synced every 0.5 s), the gateway (`python -m dataplane.gateway`) in front of it, and
3 instances of dataplane/sdk/tests/lifecycle_app.py (POST /svc/work: 20 ms of work; its
warm-up, `--warmup` s, stands for loading caches: a cold instance answers 500). `wrk` POSTs
through the gateway over `--connections` keep-alive connections (a closed loop: about 300
requests per second on a quiet 2-core machine) for `--seconds`; meanwhile each instance in
turn is sent SIGTERM and a replacement started at once, as an orchestrator rolls a
deployment, one every quarter of the window. Then the same with `--mode naive` (no warm-up
gate, no drain: the service as it is without the SDK).

Printed per mode and run: requests, rate, failed (non-2xx + socket errors, as wrk counts
them), success rate to three decimals, wrk's p50 / p90 / p99 latency over the window (every
part of it is during the rolling restart), and the gateway's CPU time per request (user +
sys of its process group, from /proc). Target: 100.000 % graceful.

Everything it starts is stopped at the end, also after an error or Ctrl-C.
Latest figures: bench/README.md.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.measure import session_cpu_seconds  # noqa: E402
from bench.servers import WRK_MISSING  # noqa: E402
from testing.lossless_lab import Lab, Load, LoadResult, lossless_lab  # noqa: E402

INSTANCES = 3


def rolling_restart(lab: Lab, mode: str, seconds: float, connections: int, warmup_s: float):
    fleet = [lab.instance(mode, warmup_s=warmup_s) for _ in range(INSTANCES)]
    lab.wait_routed({instance.port for instance in fleet}, timeout=60)
    gateway_cpu = session_cpu_seconds(lab.gateway.popen.pid)
    load = Load(f"{lab.gateway.url}/svc/work", seconds, connections).start()
    began = time.monotonic()
    for index, instance in enumerate(fleet, start=1):
        time.sleep(max(0.0, began + index * seconds / (INSTANCES + 1) - time.monotonic()))
        instance.terminate()
        lab.instance(mode, warmup_s=warmup_s)
    result = load.result()
    gateway_cpu = session_cpu_seconds(lab.gateway.popen.pid) - gateway_cpu
    for instance in fleet:
        instance.wait(15)
    lab.stop_instances()
    return result, gateway_cpu


def row(mode: str, run: int, result: LoadResult, gateway_cpu: float) -> str:
    latency = result.latency_ms
    return (
        f"{mode:<9} {run:>3} {result.requests:>9} {result.rate:>8.1f} {result.failed:>7} "
        f"{result.success_percent:>10.3f} {latency.get('50%', 0):>8.1f} "
        f"{latency.get('90%', 0):>8.1f} {latency.get('99%', 0):>8.1f} "
        f"{1e6 * gateway_cpu / max(1, result.requests):>10.0f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="20 s per mode instead of 60")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--warmup", type=float, default=3.0, help="each instance's warm-up, s")
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        sys.exit(WRK_MISSING)
    seconds = 20.0 if args.quick else args.seconds
    var = Path(tempfile.mkdtemp(prefix="graylane-bench-lossless-"))
    results: dict[str, list[LoadResult]] = {"graceful": [], "naive": []}
    try:
        with lossless_lab(var) as lab:
            print(
                f"rolling restart of {INSTANCES} instances, {seconds:.0f} s of wrk -c"
                f"{args.connections} through the gateway, warm-up {args.warmup:.1f} s"
            )
            print(
                f"{'mode':<9} {'run':>3} {'requests':>9} {'req/s':>8} {'failed':>7} "
                f"{'success %':>10} {'p50 ms':>8} {'p90 ms':>8} {'p99 ms':>8} {'gw CPU us/req':>10}"
            )
            for run in range(1, args.runs + 1):
                for mode in ("graceful", "naive"):
                    result, cpu = rolling_restart(lab, mode, seconds, args.connections, args.warmup)
                    results[mode].append(result)
                    print(row(mode, run, result, cpu), flush=True)
    finally:
        shutil.rmtree(var, ignore_errors=True)
    graceful = sum(r.requests - r.failed for r in results["graceful"]) / max(
        1, sum(r.requests for r in results["graceful"])
    )
    naive = sum(r.requests - r.failed for r in results["naive"]) / max(
        1, sum(r.requests for r in results["naive"])
    )
    print(
        f"success during rolling restarts: graceful {100 * graceful:.3f} %, "
        f"naive {100 * naive:.3f} % (target: 100.000 % graceful)"
    )


if __name__ == "__main__":
    main()
