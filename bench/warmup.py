"""First requests after registration of a cold-started service: no warm-up, warm-up on a
fixed path (the configured `GRAYLANE_WARMUP_PATHS`), and replay warm-up from the sampled
requests of the service (`GRAYLANE_WARMUP_SAMPLES`), side by side in one run.

Run:  .venv/bin/python bench/warmup.py [--quick] [--runs 5] [--first 40] [--paths 12]
                                       [--build-ms 40] [--successes 30]

The service is dataplane/sdk/tests/cold_app.py on the SDK's lifecycle, configured from the
environment: the first request of each of `--paths` paths builds what the path needs
(`--build-ms` of CPU on the event loop, as a lazy import or a cache filled on first use
does); later ones answer at once. It registers in a fake Nacos (testing/fakes) once its
warm-up is over. The dashboard runs in this process (a fresh SQLite database, uvicorn in a
thread), its sample store holding 300 sampled requests of the service over the last ten
minutes: GETs spread over the paths by popularity (the i-th most popular path 1/i as often
as the first), and 10 % POSTs, which the warm-up never replays. The fixed path is the most
popular one, as a service's `/hello` is; both warm-ups stop at `--successes` 2xx answers.

Once the instance is registered, `--first` GETs drawn from the same popularity are sent to
it one after another (the same sequence for the three modes of a run); printed per mode and
run: the time from process start to registration, the service's CPU until then (start-up
plus warm-up), the first request's latency, p50 / p99 / max of the first K, how many of
them were slow (over half the build time), and the service's CPU for them. Last, p50 / p99
over all runs per mode, and CPU per run.

Everything it starts is stopped at the end, also after an error or Ctrl-C.
Latest figures: bench/README.md.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx  # noqa: E402
import uvicorn  # noqa: E402

from bench.measure import percentile, session_cpu_seconds, summary, tail_warning  # noqa: E402
from bench.servers import setup_django  # noqa: E402
from testing.fakes.nacos_fake import FakeNacos  # noqa: E402
from testing.processes import free_port  # noqa: E402
from testing.warmup_lab import SERVICE, ColdInstance  # noqa: E402

MODES = ("none", "fixed", "replay")
SAMPLES = 300
POST_SHARE = 0.1


@dataclass
class Outcome:
    registered_s: float
    startup_cpu_s: float
    latencies_ms: list[float]
    cpu_s: float


@dataclass
class Results:
    by_mode: dict[str, list[Outcome]] = field(default_factory=lambda: {m: [] for m in MODES})


def popular_paths(count: int) -> tuple[list[str], list[float]]:
    paths = [f"/{SERVICE}/items/k{i:02d}" for i in range(count)]
    return paths, [1 / rank for rank in range(1, count + 1)]


def serve_dashboard(var_dir: str) -> tuple[str, str]:
    """The dashboard in this process, its sample store fed with the service's traffic; its
    URL and a service token bound to the service."""
    os.environ.update(IN_PROCESS_JOBS="false", DEBUG="false", ALLOWED_HOSTS="127.0.0.1")
    setup_django(f"sqlite:///{var_dir}/bench.sqlite3", var_dir, "graylane-bench-warmup-", None)
    import io

    from django.core.management import call_command

    out = io.StringIO()
    call_command(
        "issue_token", "fleet", "--role", "service", "--service", SERVICE,
        stdout=out, stderr=io.StringIO(),
    )  # fmt: skip
    from graylane.asgi import application

    port = free_port()
    config = uvicorn.Config(application, host="127.0.0.1", port=port, lifespan="off",
                            log_level="warning", access_log=False)  # fmt: skip
    threading.Thread(target=uvicorn.Server(config).run, daemon=True).start()
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            httpx.get(f"{url}/healthz", timeout=1)
            break
        except httpx.HTTPError:
            time.sleep(0.1)
    return url, out.getvalue().split()[-1]


def feed_samples(paths: list[str], weights: list[float], rng: random.Random) -> None:
    from traffic.samples import TrafficSample
    from traffic.store import store

    now = time.time()
    samples = []
    for index in range(SAMPLES):
        ts = now - 600 + index * 600 / SAMPLES
        if rng.random() < POST_SHARE:
            method, path = "POST", f"/{SERVICE}/items/orders"
        else:
            method, path = "GET", rng.choices(paths, weights)[0]
        user = str(1000 + rng.randrange(50))
        samples.append(TrafficSample(ts, SERVICE, method, path, "10.0.0.7", user=user))
    store().accept(samples)


def one_start(nacos: FakeNacos, mode: str, args, dashboard: str, token: str,
              first: list[str]) -> Outcome:  # fmt: skip
    warmup: dict[str, str] = {"SUCCESSES": str(args.successes)}
    if mode in ("fixed", "replay"):
        warmup["PATHS"] = first_path(args.paths)
    if mode == "replay":
        warmup["SAMPLES"] = "100"
    began = time.monotonic()
    instance = ColdInstance(nacos.url, dashboard=dashboard, token=token,
                            build_ms=args.build_ms, **warmup).start()  # fmt: skip
    try:
        while nacos.instance(SERVICE, "127.0.0.1", instance.port) is None:
            if time.monotonic() - began > 60:
                raise RuntimeError(f"{mode}: not registered in 60 s:\n{instance.log()}")
            time.sleep(0.005)
        registered_s = time.monotonic() - began
        assert instance.popen is not None
        startup_cpu = session_cpu_seconds(instance.popen.pid)
        latencies = []
        base = f"http://127.0.0.1:{instance.port}"
        with httpx.Client(base_url=base, timeout=10) as client:
            for path in first:
                sent = time.perf_counter()
                client.get(path).raise_for_status()
                latencies.append(1000 * (time.perf_counter() - sent))
        cpu = session_cpu_seconds(instance.popen.pid) - startup_cpu
    finally:
        instance.stop()
    return Outcome(registered_s, startup_cpu, latencies, cpu)


def first_path(count: int) -> str:
    return popular_paths(count)[0][0]


def row(mode: str, run: int, outcome: Outcome, slow_ms: float) -> str:
    lat = outcome.latencies_ms
    slow = sum(1 for value in lat if value > slow_ms)
    return (
        f"{mode:<7} {run:>3} {outcome.registered_s:>8.2f} {1000 * outcome.startup_cpu_s:>9.0f} "
        f"{lat[0]:>8.1f} {percentile(lat, 50):>7.1f} {percentile(lat, 99):>7.1f} "
        f"{max(lat):>7.1f} {slow:>5} {1000 * outcome.cpu_s:>8.0f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="2 runs")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--first", type=int, default=40, help="K: requests after registration")
    parser.add_argument("--paths", type=int, default=12)
    parser.add_argument("--build-ms", type=float, default=40.0)
    parser.add_argument("--successes", type=int, default=30)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    runs = 2 if args.quick else args.runs
    rng = random.Random(args.seed)
    paths, weights = popular_paths(args.paths)
    var = tempfile.mkdtemp(prefix="graylane-bench-warmup-")
    results = Results()
    try:
        dashboard, token = serve_dashboard(var)
        feed_samples(paths, weights, rng)
        with FakeNacos() as nacos:
            print(
                f"{args.paths} paths built on first use ({args.build_ms:.0f} ms CPU each), "
                f"{SAMPLES} samples ({POST_SHARE:.0%} POST), warm-ups stop at "
                f"{args.successes} successes; first K={args.first} GETs after registration; "
                f"load {' '.join(f'{v:.2f}' for v in os.getloadavg())}"
            )
            print(
                f"{'mode':<7} {'run':>3} {'reg. s':>8} {'CPU→reg':>9} {'1st ms':>8} "
                f"{'p50 ms':>7} {'p99 ms':>7} {'max ms':>7} {'slow':>5} {'CPU K ms':>8}"
            )
            for run in range(1, runs + 1):
                first = rng.choices(paths, weights, k=args.first)
                for mode in MODES:
                    outcome = one_start(nacos, mode, args, dashboard, token, first)
                    results.by_mode[mode].append(outcome)
                    print(row(mode, run, outcome, args.build_ms / 2), flush=True)
    finally:
        shutil.rmtree(var, ignore_errors=True)
    print(f"first {args.first} requests after registration, all runs:")
    for mode in MODES:
        outcomes = results.by_mode[mode]
        latencies = [value for outcome in outcomes for value in outcome.latencies_ms]
        first_ms = [outcome.latencies_ms[0] for outcome in outcomes]
        cpu_k = sum(o.cpu_s for o in outcomes) / len(outcomes)
        cpu_reg = sum(o.startup_cpu_s for o in outcomes) / len(outcomes)
        reg = sum(o.registered_s for o in outcomes) / len(outcomes)
        print(
            f"  {mode:<7} {summary(latencies, 'ms')}; first request mean "
            f"{sum(first_ms) / len(first_ms):.1f} ms; registered after {reg:.2f} s, "
            f"CPU {1000 * cpu_reg:.0f} ms to registration + {1000 * cpu_k:.0f} ms for the K"
        )
        if warning := tail_warning(latencies):
            print(f"          {warning}")


if __name__ == "__main__":
    main()
