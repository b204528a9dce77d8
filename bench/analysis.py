"""Release analysis on synthetic traffic: rollouts/analysis.py against a plain threshold rule.

Each simulated release has the steps targeted, 5 %, 25 %, 50 %, 100 % and lives at most
--horizon intervals (its progress deadline); each interval both versions serve N requests
(50, 500, 5,000). Prod's error rate is 1 %; the gray one is 1.5 % (0.5 points worse: it
must be rolled back) or 1 % (healthy: rolling it back is a false alarm). Both rules allow
an increase of --margin points (max_error_rate_increase) and tolerate one failed interval
(rollback at the second).

- analysis: the real judge() of the beat job (one-sided test on the figures since the
  start, inconclusive → wait).
- threshold: a failed interval when the window's gray error rate minus prod's exceeds the
  margin; otherwise it advances.

Per rule and volume: how often a bad version is rolled back (and after how many intervals,
p50/p90), how often it is promoted anyway, how often a healthy one is rolled back (false
alarms) or promoted (and after how many intervals), and how many reach the deadline
undecided (the release then fails and routing goes back to prod); then wall and CPU time
per analysis.

    .venv/bin/python bench/analysis.py [--releases 1000] [--horizon 30] [--margin 0.2]
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.measure import percentile  # noqa: E402
from rollouts.analysis import ROLLBACK, Counts, Settings, judge  # noqa: E402

STEPS = 5
PROD_RATE = 0.01


def binomial(rng: random.Random, n: int, p: float) -> int:
    """Exact binomial draw by geometric skips between successes (about n*p draws)."""
    if p <= 0:
        return 0
    log_q = math.log1p(-p)
    count, position = 0, 0
    while True:
        position += int(math.log(1.0 - rng.random()) / log_q) + 1
        if position > n:
            return count
        count += 1


def analysis_rule(settings: Settings):
    def run(intervals):
        gray_sum, prod_sum, failures, step = Counts(), Counts(), 0, 0
        for n, (gray, prod) in enumerate(intervals, 1):
            gray_sum, prod_sum = gray_sum.plus(gray), prod_sum.plus(prod)
            verdict = judge(
                settings,
                window_gray=gray,
                window_prod=prod,
                since_start_gray=gray_sum,
                since_start_prod=prod_sum,
                failures=failures,
            )
            failures = verdict.failures
            if verdict.outcome == ROLLBACK:
                return "rolled_back", n
            if verdict.advances:
                step += 1
                if step == STEPS:
                    return "promoted", n
        return "deadline", len(intervals)

    return run


def threshold_rule(settings: Settings):
    margin = settings.max_error_rate_increase / 100

    def run(intervals):
        failures, step = 0, 0
        for n, (gray, prod) in enumerate(intervals, 1):
            if gray.total < settings.min_requests or prod.total < settings.min_requests:
                continue
            if gray.errors / gray.total - prod.errors / prod.total > margin:
                failures += 1
                if failures > settings.failures_tolerated:
                    return "rolled_back", n
                continue
            step += 1
            if step == STEPS:
                return "promoted", n
        return "deadline", len(intervals)

    return run


def traffic(rng, requests, gray_rate, horizon):
    return [
        (
            Counts(requests, binomial(rng, requests, gray_rate)),
            Counts(requests, binomial(rng, requests, PROD_RATE)),
        )
        for _ in range(horizon)
    ]


def spread(values) -> str:
    if not values:
        return "      -"
    return f"{percentile(values, 50):3.0f} /{percentile(values, 90):3.0f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--releases", type=int, default=1000)
    parser.add_argument("--horizon", type=int, default=30)
    parser.add_argument("--margin", type=float, default=0.2)
    parser.add_argument("--seed", type=int, default=14)
    args = parser.parse_args()
    print(
        f"{args.releases} releases per row, {STEPS} steps, deadline {args.horizon} intervals; "
        f"prod 1 % errors, bad gray 1.5 %; margin {args.margin} points, 1 failure tolerated"
    )
    print("intervals: p50 / p90 over the releases concerned")
    header = (
        f"{'rule':<9} {'req/int':>7} | {'bad: rolled back':>16} {'intervals':>9} "
        f"{'promoted':>8} {'deadline':>8} | {'healthy: false alarm':>20} {'promoted':>8} "
        f"{'intervals':>9} {'deadline':>8}"
    )
    print(header)
    print("-" * len(header))
    for requests in (50, 500, 5000):
        settings = Settings(
            interval_s=60,
            min_requests=min(50, requests),
            max_error_rate_increase=args.margin,
            failures_tolerated=1,
        )
        rng = random.Random(args.seed + requests)
        bad = [
            traffic(rng, requests, PROD_RATE + 0.005, args.horizon) for _ in range(args.releases)
        ]
        good = [traffic(rng, requests, PROD_RATE, args.horizon) for _ in range(args.releases)]
        for name, make in (("analysis", analysis_rule), ("threshold", threshold_rule)):
            run = make(settings)
            bad_runs = [run(series) for series in bad]
            good_runs = [run(series) for series in good]
            caught = [n for outcome, n in bad_runs if outcome == "rolled_back"]
            missed = sum(outcome == "promoted" for outcome, _ in bad_runs)
            bad_late = sum(outcome == "deadline" for outcome, _ in bad_runs)
            alarms = sum(outcome == "rolled_back" for outcome, _ in good_runs)
            promoted = [n for outcome, n in good_runs if outcome == "promoted"]
            good_late = sum(outcome == "deadline" for outcome, _ in good_runs)
            share = args.releases
            print(
                f"{name:<9} {requests:>7} | {len(caught) / share:>16.1%} "
                f"{spread(caught):>9} {missed / share:>8.1%} {bad_late / share:>8.1%} | "
                f"{alarms / share:>20.1%} {len(promoted) / share:>8.1%} "
                f"{spread(promoted):>9} {good_late / share:>8.1%}"
            )
    window = (Counts(5000, 60), Counts(5000, 50))
    since = (Counts(50_000, 600), Counts(50_000, 500))
    rounds = 20_000
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(rounds):
        judge(
            Settings(min_requests=50, max_error_rate_increase=args.margin),
            window_gray=window[0],
            window_prod=window[1],
            since_start_gray=since[0],
            since_start_prod=since[1],
            failures=0,
        )
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    print(
        f"judge(): {1e6 * wall / rounds:.1f} µs wall, {1e6 * cpu / rounds:.1f} µs CPU per "
        f"analysis (the statistics alone, {rounds} runs; the beat job adds one read of the "
        f"live windows and a few row writes per interval)"
    )


if __name__ == "__main__":
    main()
