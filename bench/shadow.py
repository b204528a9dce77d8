"""What shadow traffic costs the client: two Python gateways (`python -m dataplane.gateway`),
side by side in one run, on the same upstream, one with a 10 % mirror of user-app's prod
traffic and one without; the latency wrk sees through each.

Run:  .venv/bin/python bench/shadow.py [--runs 5] [--seconds 5] [--percent 10]
                                       [--connections 1 16]

Everything runs on this machine as child processes: prod (V1) is an nginx (1 worker)
answering every path with a fixed body, the mirror version (V2) another one, logging each
request it gets (so the share copied is counted, not assumed). Each gateway routes by a
gateway document read from its cache file (its dashboard is unreachable: fail static, its
comparison reports dropped), the same but for `services.user-app.mirror`. wrk asks
`GET /user-app/hello?n=<counter>` (a new target each time: the mirror's bucket hashes the
method, target and client), `-t1 -c<connections> --latency`, for --seconds per gateway and
connection count, the two gateways alternating which goes first from run to run.

Printed per run and connection count: p50, p99, requests/s and the gateway's CPU per request
(its process, user + system) of both, and the mirror's added p50 and p99 (with minus
without); then the medians over the runs. The machine has
2 cores for wrk, both upstreams and the gateway under load together: copies take CPU from
the same cores as the client's requests, so the figure under load is an upper bound.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.gateway import (  # noqa: E402
    _LATENCY,
    _UNIT_MS,
    HEADERS,
    Child,
    nginx,
    our_gateway,
    upstream_nginx,
)
from bench.servers import WRK_MISSING  # noqa: E402
from routing_engine import DEFAULT_POLICY  # noqa: E402

# A new target per request: wrk's Lua hook.
VARYING_TARGET = """
local n = 0
request = function()
  n = n + 1
  return wrk.format("GET", "/user-app/hello?n=" .. n)
end
"""


def mirror_nginx(directory: Path) -> Child:
    log = directory / "mirror.log"
    return nginx(
        directory,
        f"""log_format copies '$connection';
           server {{ listen 127.0.0.1:PORT; access_log {log} copies;
           location / {{ default_type application/json; return 200 '{{"version":"V2"}}'; }} }}""",
    )


def document(prod: int, mirror: int, percent: float | None) -> bytes:
    instances = [
        {"id": "V1-1", "host": "127.0.0.1", "port": prod, "version": "V1", "weight": 1.0},
        {"id": "V2-1", "host": "127.0.0.1", "port": mirror, "version": "V2", "weight": 1.0},
    ]
    service: dict = {"prod": "V1", "gray": "V2", "instances": instances}
    if percent is not None:
        service["mirror"] = {"percent": percent}
    return json.dumps(
        {
            "generation": 1,
            "revision": 1,
            "checksum": "bench",
            "gray": {**DEFAULT_POLICY, "enabled": True, "routing": True},
            "versions": {"prod": "V1", "gray": "V2"},
            "services": {"user-app": service},
        }
    ).encode()


def wrk(port: int, seconds: int, connections: int, script: Path) -> dict:
    args = ["wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "--latency", "-s", str(script)]
    for header in HEADERS:
        args += ["-H", header]
    out = subprocess.run(
        [*args, f"http://127.0.0.1:{port}/"], capture_output=True, text=True, check=True
    ).stdout
    if "Non-2xx" in out or "Socket errors" in out:
        raise SystemExit(f"errors under load on port {port}:\n{out}")
    latency = {int(p): float(v) * _UNIT_MS[u] for p, v, u in _LATENCY.findall(out)}
    requests = int(next(line for line in out.splitlines() if "requests in" in line).split()[0])
    rate = float(next(line for line in out.splitlines() if "Requests/sec" in line).split()[1])
    return {"requests": requests, "rate": rate, "p50": latency[50], "p99": latency[99]}


def copies(log: Path) -> int:
    return len(log.read_text().splitlines()) if log.exists() else 0


def connections_used(log: Path) -> int:
    """Connections the copies came on (the mirror logs each request's connection number)."""
    return len(set(log.read_text().split())) if log.exists() else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--percent", type=float, default=10.0)
    parser.add_argument("--connections", type=int, nargs="+", default=[1, 16])
    args = parser.parse_args()
    if not os.path.exists("/usr/bin/wrk"):
        raise SystemExit(WRK_MISSING)
    with tempfile.TemporaryDirectory() as temp:
        work = Path(temp)
        script = work / "varying.lua"
        script.write_text(VARYING_TARGET)
        prod = upstream_nginx(work / "prod")
        mirror = mirror_nginx(work / "mirror")
        log = work / "mirror" / "mirror.log"
        gateways = {}
        for name, percent in (("none", None), ("mirror", args.percent)):
            cache = work / f"{name}.json"
            cache.write_text(document(prod.port, mirror.port, percent).decode())
            gateways[name] = our_gateway(cache)
        children = [prod, mirror, *gateways.values()]
        try:
            results: dict[int, list[dict]] = {c: [] for c in args.connections}
            for run in range(args.runs):
                order = ["none", "mirror"] if run % 2 == 0 else ["mirror", "none"]
                for connections in args.connections:
                    row: dict = {}
                    for name in order:
                        wrk(gateways[name].port, 1, connections, script)  # warm-up
                        before, cpu = copies(log), gateways[name].cpu()
                        row[name] = wrk(gateways[name].port, args.seconds, connections, script)
                        row[name]["copied"] = copies(log) - before
                        spent = gateways[name].cpu() - cpu
                        row[name]["cpu_us"] = 1e6 * spent / row[name]["requests"]
                    results[connections].append(row)
                    report(run + 1, connections, row)
            print(f"\nMedians over {args.runs} runs ({args.percent:g} % mirror), "
                  f"{copies(log)} copies on {connections_used(log)} connections:")  # fmt: skip
            for connections, rows in results.items():
                added = [added_ms(row) for row in rows]
                print(
                    f"  c={connections:<3} added p50 {statistics.median(a[0] for a in added):+.3f} "
                    f"ms, added p99 {statistics.median(a[1] for a in added):+.3f} ms; "
                    f"without p50 {statistics.median(r['none']['p50'] for r in rows):.3f} ms, "
                    f"p99 {statistics.median(r['none']['p99'] for r in rows):.3f} ms; "
                    f"copied {statistics.median(share(r) for r in rows):.1f} % of requests; "
                    f"gateway CPU per request {median_of(rows, 'none', 'cpu_us'):.0f} µs "
                    f"without, {median_of(rows, 'mirror', 'cpu_us'):.0f} µs with"
                )
        finally:
            for child in children:
                child.stop()


def median_of(rows: list[dict], name: str, key: str) -> float:
    return statistics.median(row[name][key] for row in rows)


def added_ms(row: dict) -> tuple[float, float]:
    return row["mirror"]["p50"] - row["none"]["p50"], row["mirror"]["p99"] - row["none"]["p99"]


def share(row: dict) -> float:
    # Copies still in flight when wrk stops are counted in the next measurement's; over
    # seconds of load that is a few of thousands.
    return 100 * row["mirror"]["copied"] / max(1, row["mirror"]["requests"])


def report(run: int, connections: int, row: dict) -> None:
    p50, p99 = added_ms(row)
    print(
        f"run {run} c={connections}: "
        + "; ".join(
            f"{name} p50 {r['p50']:.3f} ms p99 {r['p99']:.3f} ms {r['rate']:.0f} req/s "
            f"{r['cpu_us']:.0f} µs CPU/req"
            for name, r in row.items()
        )
        + f"; added p50 {p50:+.3f} ms p99 {p99:+.3f} ms; copied {share(row):.1f} %",
        flush=True,
    )


if __name__ == "__main__":
    main()
