"""Impact preview over a window of sampled requests (traffic/impact.py) against evaluating the
same samples one `simulate` call at a time (policy/simulation.py, the simulator's per-request
path: the live document, then the draft).

Samples come from a generator shaped like real traffic: --users users (50,000) whose request
counts follow a Zipf law (s=1.1), each with a home address (a quarter have a second one, a
phone) and a city of 300 (Zipf too); one request in twenty has no user and comes from one of
20,000 addresses; five services (one taking half the traffic); one request in a thousand
carries the gray header. The live policy has 1,000 users, 100 CIDRs, 20 cities, a header
rule and 5 %; the draft adds 1,000 users, a CIDR, `Paris` (no sample comes from there), 10 %
and a lane of 500 users at 2 % (bench/README.md).

- ours: the grouping of the samples by decision input and one decision per distinct input
  and document (impact()), then the whole preview() as the API runs it (the store's window
  read and sorted, the instances read, impact()).
- per sample: the same engine without grouping (each sample decided by both matchers).
- simulate: simulate() per sample and document on the first --simulated samples, as many
  calls as a preview through the simulator makes; the figure for all samples extrapolated.

Then the time per distinct input at other numbers of users (the figure follows the distinct
inputs, not the samples, once they are grouped). Wall and CPU time; --passes passes, best and
median.

    .venv/bin/python bench/preview.py [--samples 1000000] [--users 50000] [--passes 5]
        [--simulated 20000] [--seed 1]
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.measure import Clock  # noqa: E402
from bench.sync import setup_django  # noqa: E402

SERVICES = {"user-app": 50, "order-app": 20, "pay-app": 15, "cart-app": 10, "search-app": 5}
CITIES = ["Berlin", "Hamburg", "Munich", "Cologne", "Frankfurt"] + [f"City {n}" for n in range(295)]
TARGET_SECONDS = 2.0
TARGET_RATIO = 20.0


def zipf_weights(n: int, s: float = 1.1) -> list[float]:
    return [1 / (rank**s) for rank in range(1, n + 1)]


def address(rng: random.Random) -> str:
    return str(ipaddress.IPv4Address(rng.randrange(0x01000000, 0xDF000000)))


def network(rng: random.Random) -> str:
    return str(ipaddress.IPv4Network((address(rng), rng.choice([16, 24, 28, 32])), strict=False))


def generate(count: int, users: int, rng: random.Random) -> list[Any]:
    from traffic.samples import TrafficSample

    homes = [[address(rng)] + ([address(rng)] if rng.random() < 0.25 else []) for _ in range(users)]
    cities = rng.choices(CITIES, zipf_weights(len(CITIES)), k=users)
    anonymous = [address(rng) for _ in range(20_000)]
    who = rng.choices(range(users), zipf_weights(users), k=count)
    services = rng.choices(list(SERVICES), list(SERVICES.values()), k=count)
    now = time.time()
    samples = []
    for n, (user, service) in enumerate(zip(who, services, strict=True)):
        headers = {"x-gray": "on"} if rng.random() < 0.001 else {}
        if rng.random() < 0.05:
            ip, name, city = rng.choice(anonymous), None, rng.choice(CITIES)
        else:
            ip, name, city = rng.choice(homes[user]), f"u{user}", cities[user]
        samples.append(
            TrafficSample(now - 600 + n * 600 / count, service, "GET", "/", ip, name, city, headers)
        )
    return samples


def policies(users: int, rng: random.Random) -> tuple[dict[str, Any], dict[str, Any], dict]:
    """(the live policy, the draft policy, the draft's lane)."""
    live = {
        "enabled": True,
        "routing": True,
        "header": {"name": "X-Gray", "value": "on"},
        "ips": [network(rng) for _ in range(100)],
        "cities": rng.sample(CITIES, 20),
        "users": [f"u{n}" for n in rng.sample(range(users), 1000)],
        "user_header": "X-User-No",
        "city_header": "X-City",
        "percent": 5,
        "versions": {"prod": "V1", "gray": "V2"},
    }
    draft = {
        **live,
        "ips": [*live["ips"], "10.0.0.0/8"],
        "cities": [*live["cities"], "Paris"],
        "users": live["users"] + [f"u{n}" for n in rng.sample(range(users), 1000)],
        "percent": 10,
    }
    lane = {
        "name": "beta",
        "priority": 10,
        "match": {"users": [f"u{n}" for n in rng.sample(range(users), 500)], "percent": 2},
        "members": {"user-app": "V3", "order-app": "V3"},
    }
    return live, draft, lane


def setup_fleet(live: dict[str, Any]) -> None:
    from policy.services import update_policy
    from registry_sync.models import Instance, Service

    update_policy(live, partial=False, actor="bench", source="api", expected_revision=None)
    for name in SERVICES:
        service = Service.objects.create(name=name)
        for n, version in enumerate(["V1", "V1", "V2", "V3"]):
            Instance.objects.create(
                service=service, instance_id=f"{name}-{n}", host=f"10.9.0.{n}", port=80,
                version=version, state="UP",
            )  # fmt: skip


def timed(function: Callable[[], Any], passes: int) -> tuple[list[Clock], Any]:
    clocks, result = [], None
    for _ in range(passes):
        start = Clock.now()
        result = function()
        clocks.append(Clock.now().since(start))
    return clocks, result


def show(clocks: list[Clock]) -> str:
    walls, cpus = [c.wall for c in clocks], [c.cpu for c in clocks]
    return (
        f"wall best {min(walls):.3f} s, median {statistics.median(walls):.3f} s; "
        f"CPU best {min(cpus):.3f} s, median {statistics.median(cpus):.3f} s "
        f"({len(clocks)} passes)"
    )


def measure(args: argparse.Namespace) -> None:
    from policy.proposals import draft_document
    from policy.publishing import load_state
    from policy.simulation import compile_matcher, instances_of, simulate
    from traffic import store as store_module
    from traffic.impact import Decider, group, impact, preview
    from traffic.store import MemorySampleStore

    rng = random.Random(args.seed)
    live, draft_policy, lane = policies(args.users, rng)
    setup_fleet(live)
    state = load_state()
    live_document = state.document
    draft = draft_document(live_document, draft_policy, [lane])
    samples = generate(args.samples, args.users, rng)
    instances = instances_of(SERVICES)
    print(f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}")

    def ours() -> dict[str, Any]:
        return impact(live_document, draft, group(samples), instances)

    clocks, result = timed(ours, args.passes)
    inputs = group(samples)
    moved = {name: body["moved"] for name, body in result["services"].items()}
    print(
        f"{len(samples):,} samples, {len(inputs):,} distinct decision inputs "
        f"({len(samples) / len(inputs):.1f} samples each); moved: {moved}"
    )
    unmatched = [f"{r['rule']} {r['value']}" for r in result["rules"] if not r["matched"]]
    print(f"rule entries {len(result['rules']):,}, never matched {len(unmatched):,} "
          f"(among them: {', '.join(unmatched[-2:])})")  # fmt: skip
    print(f"ours, impact():         {show(clocks)}")
    best_ours = min(c.cpu for c in clocks)

    kept = MemorySampleStore(per_service=args.samples, in_all=args.samples)
    kept.accept(samples)
    store_module._configured = kept
    clocks, _ = timed(lambda: preview(state, draft), args.passes)
    print(f"ours, whole preview():  {show(clocks)}")
    best_preview = min(c.wall for c in clocks)

    def per_sample() -> None:
        # The same engine and version look-up, each sample decided by itself.
        now = Decider(live_document, compile_matcher(live_document), instances)
        then = Decider(draft, compile_matcher(draft), instances)
        for s in samples:
            headers = s.headers
            now.version(s.service, headers, s.ip, s.city or now.city(headers, s.ip), s.user)
            then.version(s.service, headers, s.ip, s.city or then.city(headers, s.ip), s.user)

    clocks, _ = timed(per_sample, 1)
    print(f"per sample, no grouping: {show(clocks)}")

    subset = samples[: args.simulated]
    # The draft as an unsaved live state: simulate() reads its document as it reads the live one.
    draft_state = type(state)(revision=0, content=json.dumps(draft), updated_at=state.updated_at)

    def simulated() -> None:
        for policy_state in (state, draft_state):
            for s in subset:
                simulate(policy_state, service=s.service, headers=s.headers, ip=s.ip,
                         city=s.city, user=s.user)  # fmt: skip

    clocks, _ = timed(simulated, max(1, args.passes // 2))
    best_simulated = min(c.cpu for c in clocks) * len(samples) / len(subset)
    print(
        f"simulate per sample ({len(subset):,} samples × 2 documents): {show(clocks)}; "
        f"for {len(samples):,}: {best_simulated:.1f} s CPU (extrapolated)"
    )

    print("impact() by the number of users (same generator, 200,000 samples; CPU per distinct "
          "input, the grouping of the samples included):")  # fmt: skip
    for users in (500, 5_000, 50_000, 500_000):
        more = generate(200_000, users, random.Random(args.seed))
        clocks, _ = timed(
            lambda more=more: impact(state.document, draft, group(more), instances), 3
        )
        distinct = len(group(more))
        best = min(c.cpu for c in clocks)
        print(f"  {users:>7,} users: {distinct:>7,} distinct inputs, {best:.3f} s CPU, "
              f"{best / distinct * 1e6:.1f} µs per distinct input")  # fmt: skip

    print(
        f"target: {args.samples:,} samples previewed in ≤ {TARGET_SECONDS:g} s: whole preview() "
        f"{best_preview:.2f} s wall: {'met' if best_preview <= TARGET_SECONDS else 'missed'}; "
        f"≥ {TARGET_RATIO:g}× simulate per sample: {best_simulated / best_ours:.0f}× (CPU): "
        f"{'met' if best_simulated / best_ours >= TARGET_RATIO else 'missed'}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=1_000_000)
    parser.add_argument("--users", type=int, default=50_000)
    parser.add_argument("--passes", type=int, default=5)
    parser.add_argument("--simulated", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    var_dir = tempfile.TemporaryDirectory(prefix="graylane-bench-preview-")
    try:
        setup_django(f"sqlite:///{var_dir.name}/bench.sqlite3", var_dir.name)
        measure(args)
    finally:
        var_dir.cleanup()


if __name__ == "__main__":
    main()
