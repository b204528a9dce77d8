"""What graylane/long_lived.py (gc.freeze once started and once warmed up) buys the web
server: its garbage-collection pauses under load, with and without, side by side in one run.

Run:  .venv/bin/python bench/gc_freeze.py [--runs 3] [--warm 18] [--measure 12]
      (needs Debian's wrk: apt-get install wrk)

Each run starts uvicorn serving graylane.asgi on a fresh SQLite database twice, with
long_lived's freezing and without (the order swapped every run), loads it with Debian's
`wrk -t1 -c8` (the login page, then an authenticated API read) for `--warm` seconds (past
long_lived's second freeze) and then `--measure` seconds, and prints every collection the
server made in the measured window (from gc.callbacks, in the server): how many per
generation, the full (generation 2) pauses, the time spent in all collections and one full
`gc.collect()` timed at the end. Medians (measure.percentile's p50) are printed last,
ratio off / on.
Latest figures: bench/README.md.
"""

import argparse
import json
import os
import shutil
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.measure import percentile  # noqa: E402
from bench.servers import WRK_MISSING, serve, template_database, wrk  # noqa: E402

GC_LOG = "gc.json"  # in the server's GRAYLANE_VAR_DIR


def make_app():
    """uvicorn --factory: graylane.asgi's application, its collections recorded; without
    long_lived's freezing when BENCH_FREEZE=0 (bench/stock.py's no-gc-freeze). SIGUSR1
    writes the record to GC_LOG."""
    import gc

    from bench.stock import install

    install([] if os.environ["BENCH_FREEZE"] == "1" else ["no-gc-freeze"])
    from graylane.asgi import application

    started, events = [0.0], []

    def record(phase, info):
        if phase == "start":
            started[0] = time.perf_counter()
        else:
            pause = (time.perf_counter() - started[0]) * 1000
            events.append((time.time(), info["generation"], pause))

    def dump(*_):
        gc.callbacks.remove(record)
        full = time.perf_counter()
        gc.collect()
        full = (time.perf_counter() - full) * 1000
        written = {"events": events, "full_ms": full, "frozen": gc.get_freeze_count()}
        (Path(os.environ["GRAYLANE_VAR_DIR"]) / GC_LOG).write_text(json.dumps(written))

    gc.callbacks.append(record)
    signal.signal(signal.SIGUSR1, dump)
    return application


def one_server(freeze: bool, template: Path, token: str, args) -> dict:
    factory = "bench.gc_freeze:make_app"
    with serve(factory, template, BENCH_FREEZE="1" if freeze else "0") as server:
        pages = [
            (server.url + "/accounts/login/", None),
            (server.url + "/api/v1/policy/", f"Authorization: Token {token}"),
        ]
        for page, header in pages:
            wrk(page, max(1, args.warm // 2), header)
        since = time.time()
        requests = 0
        for page, header in pages:
            requests += wrk(page, max(1, args.measure // 2), header)
        until = time.time()
        log = server.var_dir / GC_LOG
        server.popen.send_signal(signal.SIGUSR1)
        deadline = time.monotonic() + 10
        while not (log.exists() and log.stat().st_size) and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.1)  # written whole
        record = json.loads(log.read_text())
    events = [e for e in record["events"] if since <= e[0] <= until]
    return {
        "requests": requests,
        "counts": [sum(e[1] == g for e in events) for g in (0, 1, 2)],
        "full_pauses": [e[2] for e in events if e[1] == 2],
        "all_gc_ms": sum(e[2] for e in events),
        "longest": max((e[2] for e in events), default=0.0),
        "full_ms": record["full_ms"],
        "frozen": record["frozen"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--warm", type=int, default=18, help="seconds (long_lived: 15)")
    parser.add_argument("--measure", type=int, default=12, help="seconds")
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        sys.exit(WRK_MISSING)
    results: dict[bool, list[dict]] = {True: [], False: []}
    with template_database() as (template, token):
        for run in range(1, args.runs + 1):
            for freeze in (True, False) if run % 2 else (False, True):
                r = one_server(freeze, template, token, args)
                results[freeze].append(r)
                pauses = ", ".join(f"{p:.1f}" for p in r["full_pauses"])
                print(
                    f"run {run} freeze {'on ' if freeze else 'off'} {r['requests']:5d} requests | "
                    f"collections gen0/1/2 {'/'.join(map(str, r['counts']))} | full pauses ms "
                    f"[{pauses}] | all GC {r['all_gc_ms']:.0f} ms | longest {r['longest']:.1f} ms"
                    f" | one gc.collect() {r['full_ms']:.1f} ms ({r['frozen']} objects frozen)",
                    flush=True,
                )

    def median(freeze: bool, key: str) -> float:
        values = [r[key] for r in results[freeze]]
        if key == "full_pauses":  # the longest of each run
            values = [max(pauses, default=0.0) for pauses in values]
        return percentile(values, 50)

    print(f"medians of {args.runs} runs (off / on):")
    for key, what in (
        ("full_pauses", "longest full-collection pause, ms"),
        ("all_gc_ms", "time in all collections, ms"),
        ("full_ms", "one gc.collect(), ms"),
    ):
        off, on = median(False, key), median(True, key)
        ratio = f"{off / on:.1f}" if on else "-"  # none with it on (a short run: often)
        print(f"  {what:34s} off {off:7.1f}  on {on:7.1f}  ratio {ratio}")


if __name__ == "__main__":
    main()
