"""Gray decision speed: routing_engine.GrayMatcher against a list scan, and compile time.

    .venv/bin/python bench/engine.py [--quick] [--seed N] [--pool N] [--passes N] [--no-valgrind]

Policy: 100,000 users, 10,000 IP rules (IPv4 /8../32, mostly long prefixes, plus IPv6),
300 cities and a header rule; and the same with 19 more lanes, each with a header value,
50 CIDRs, 500 users and a percent (the cost of lanes: one lookup per rule kind for all).
Requests: mostly misses, the worst case for a scan because
every list is walked to its end, and a share of hits of each kind.

GrayMatcher is measured twice, side by side: on the engine's C primitives
(routing_engine/_speedups.c, built by `make install`; the default) and on its pure Python
ones (the fallback), after checking that both decide every request of the pool the same.

What one decision costs is what a gateway pays per request with the raw request headers,
their names in the client's spelling: GrayMatcher's `decide(pick_headers(headers), ip)`
(pick_headers lower-cases only the headers the rules name, each spelling once), the
baselines' `decide(lower_headers(headers), ip)`; the header normalisation and the loop that
feeds the requests are inside the timed loop, for every variant. The requests come from a
pool of distinct requests (--pool, 10,000), kept as the
bytes an HTTP parser reads; before each pass (untimed) the next slice of the pool is decoded
into new dicts and strings, so no pass sees a string object (or a cached string hash) an
earlier pass has seen, as no gateway sees the same request objects twice.

The baseline is a generous list scan of the reference design: it parses the client address
once per request into an integer and matches each IP rule by integer mask ((address & mask)
== network, masks precomputed), then scans the city and user lists. Each variant is timed on
several passes over different slices (the slow scan on fewer requests); printed are the
median wall time and the median CPU time (this process, time.process_time) per decision. The
compile time of GrayMatcher (median of several builds) is printed per list entry. The last
line is the figure: how many times faster than the list scan.

Before it, the figure that does not move with the machine's load (bench/instructions.py):
instructions and last-level cache misses per decision (reference policy, percent=10, 20
lanes; C and pure Python, each in a valgrind process of its own, the two at once) counted by
callgrind over 5,000 requests, each decoded from the pool's bytes into new objects just
before its decision (as a gateway's just-parsed request; the decoding, counted alone, taken
off), against the count at commit a8954e8 and the targets. It takes 2-4 minutes under
valgrind; --no-valgrind leaves it out.
Latest figures: bench/README.md.
"""

from __future__ import annotations

import argparse
import gc
import ipaddress
import random
import statistics
import sys
from bisect import bisect_right
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from socket import AF_INET, AF_INET6, inet_pton

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import instructions  # noqa: E402
from bench.measure import Clock  # noqa: E402
from routing_engine import (  # noqa: E402
    DEFAULT_POLICY,
    GRAY,
    PROD,
    GrayMatcher,
    lower_headers,
    matcher,
    normalize_policy,
)
from routing_engine.lanes import normalize_lane  # noqa: E402

USERS = 100_000
IPV4_RULES = 9_500
IPV6_RULES = 500
CITIES = 300
HIT_SHARE = 0.10
TARGET_DECISION_US = 1.0
TARGET_COMPILE_US_PER_ENTRY = 1.0
TARGET_RATIO = 1000
LANES = 20
TARGET_LANES_RATIO = 1.25
# Counted by callgrind: instructions per decision (pick_headers + decide) at commit a8954e8,
# before this target was set (lower_headers + decide, the same requests and count), and
# the targets set against it (issue 23, item 5).
TODAY_INSTRUCTIONS = 17_079
TARGET_INSTRUCTIONS = TODAY_INSTRUCTIONS / 3
TARGET_PERCENT_INSTRUCTIONS = 1.2
COUNTED = 5_000

_V4_MAPPED = bytes(10) + b"\xff\xff"


class ListScan:
    """The reference design's checks, every rule list scanned per request; IP rules matched by
    integer masks (parsed once up front, as a service parses its configuration once), the
    client address parsed once per request."""

    def __init__(self, policy):
        self.header = (policy["header"]["name"].lower(), policy["header"]["value"])
        self.rules = {4: [], 6: []}
        for entry in policy["ips"]:
            network = ipaddress.ip_network(entry, strict=False)
            mask = int(network.netmask)
            self.rules[network.version].append((int(network.network_address) & mask, mask))
        self.cities = list(policy["cities"])
        self.users = list(policy["users"])
        self.city_key = policy["city_header"].lower()
        self.user_key = policy["user_header"].lower()

    def ip_matches(self, ip) -> bool:
        try:
            if ":" in ip:
                packed = inet_pton(AF_INET6, ip)
                if packed[:12] == _V4_MAPPED:
                    packed = packed[12:]
            else:
                packed = inet_pton(AF_INET, ip)
        except (OSError, TypeError):
            return False
        address = int.from_bytes(packed)
        for network, mask in self.rules[4 if len(packed) == 4 else 6]:
            if address & mask == network:
                return True
        return False

    def decide(self, headers, ip):
        name, value = self.header
        if headers.get(name) == value:
            return GRAY
        if ip is not None and self.ip_matches(ip):
            return GRAY
        if headers.get(self.city_key) in self.cities:
            return GRAY
        if headers.get(self.user_key) in self.users:
            return GRAY
        return PROD


class NaiveSetBisect:
    """The obvious fix: sets for users and cities, ipaddress + bisect over int ranges."""

    def __init__(self, policy):
        self.header = (policy["header"]["name"].lower(), policy["header"]["value"])
        self.ranges = {4: ([], []), 6: ([], [])}
        by_version = {4: [], 6: []}
        for entry in policy["ips"]:
            network = ipaddress.ip_network(entry)
            by_version[network.version].append(network)
        for version, networks in by_version.items():
            starts, ends = self.ranges[version]
            for network in ipaddress.collapse_addresses(networks):
                starts.append(int(network.network_address))
                ends.append(int(network.broadcast_address))
        self.cities = frozenset(policy["cities"])
        self.users = frozenset(policy["users"])
        self.city_key = policy["city_header"].lower()
        self.user_key = policy["user_header"].lower()

    def decide(self, headers, ip):
        name, value = self.header
        if headers.get(name) == value:
            return GRAY
        try:
            address = ipaddress.ip_address(ip)
        except ValueError:
            address = None
        if address is not None:
            if address.version == 6 and address.ipv4_mapped:
                address = address.ipv4_mapped
            starts, ends = self.ranges[address.version]
            number = int(address)
            index = bisect_right(starts, number) - 1
            if index >= 0 and number <= ends[index]:
                return GRAY
        if headers.get(self.city_key) in self.cities:
            return GRAY
        if headers.get(self.user_key) in self.users:
            return GRAY
        return PROD


# -- the policy and the requests ---------------------------------------------------------------


def random_ipv4_rule(rnd: random.Random) -> str:
    # Mostly long prefixes, now and then a short one: a few % of IPv4 ends up covered.
    prefix = max(8, 32 - int(rnd.expovariate(1 / 3)))
    return str(ipaddress.IPv4Network((rnd.getrandbits(32), prefix), strict=False))


def random_ipv6_rule(rnd: random.Random) -> str:
    prefix = rnd.choice((48, 56, 64, 96, 128))
    address = (0x2001_0DB8 << 96) | rnd.getrandbits(96)
    return str(ipaddress.IPv6Network((address, prefix), strict=False))


def build_policy(rnd: random.Random) -> dict:
    users = [str(n) for n in rnd.sample(range(10_000_000, 100_000_000), USERS)]
    ips = [random_ipv4_rule(rnd) for _ in range(IPV4_RULES)]
    ips += [random_ipv6_rule(rnd) for _ in range(IPV6_RULES)]
    cities = [f"city-{n}" for n in range(CITIES)]
    return normalize_policy(
        {
            **DEFAULT_POLICY,
            "enabled": True,
            "header": {"name": "gray", "value": "gray-996"},
            "ips": ips,
            "cities": cities,
            "users": users,
        }
    )


def build_lanes(rnd: random.Random, count: int) -> dict:
    """`count` lanes beside gray, each with a header value, CIDRs, users and a percent: the
    request pays for every kind of rule of every lane."""
    lanes = {}
    for n in range(count):
        lanes[f"lane-{n}"] = normalize_lane(
            {
                "priority": 10 + n,
                "match": {
                    "header": {"name": "x-lane", "value": f"lane-{n}"},
                    "ips": sorted({random_ipv4_rule(rnd) for _ in range(50)}),
                    "users": [str(rnd.randrange(10**9, 2 * 10**9)) for _ in range(500)],
                    "percent": 0.5,
                },
                "members": {"user-app": "V3"},
            }
        )
    return lanes


def address_in(rnd: random.Random, rule: str) -> str:
    network = ipaddress.ip_network(rule)
    offset = rnd.randrange(network.num_addresses)
    return str(network.network_address + offset)


USER_AGENTS = (
    "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15",
    "okhttp/4.12.0",
    "curl/8.5.0",
)

RawRequest = tuple[tuple[tuple[bytes, bytes], ...], bytes]


def build_pool(rnd: random.Random, policy: dict, count: int) -> list[RawRequest]:
    """`count` distinct requests as an HTTP parser reads them: header (name, value) bytes in
    the client's spelling, and the client address."""
    pool = []
    for n in range(count):
        headers = {
            "Host": "shop.example.com",
            "User-Agent": rnd.choice(USER_AGENTS),
            "Accept": "application/json",
            "Accept-Encoding": "gzip, deflate, br",
            "X-Request-Id": f"{n:08x}-{rnd.getrandbits(64):016x}",
            "X-User-No": str(rnd.randrange(100_000_000, 1_000_000_000)),
            "X-City": f"elsewhere-{rnd.randrange(1000)}",
        }
        if rnd.random() < 0.1:
            ip = str(ipaddress.IPv6Address((0x2001_0DB8 << 96) | rnd.getrandbits(96)))
        else:
            ip = str(ipaddress.IPv4Address(rnd.getrandbits(32)))
        if rnd.random() < HIT_SHARE:
            kind = rnd.choice(("header", "ip", "city", "user"))
            if kind == "header":
                headers["Gray"] = "gray-996"
            elif kind == "ip":
                ip = address_in(rnd, rnd.choice(policy["ips"]))
            elif kind == "city":
                headers["X-City"] = rnd.choice(policy["cities"])
            else:
                headers["X-User-No"] = rnd.choice(policy["users"])
        raw = tuple((name.encode(), value.encode()) for name, value in headers.items())
        pool.append((raw, ip.encode()))
    return pool


def fresh_requests(pool: list[RawRequest], start: int, count: int) -> list[tuple[dict, str]]:
    """`count` requests from pool[start:], wrapping around, as new dicts of new strings."""
    size = len(pool)
    requests = []
    for n in range(start, start + count):
        raw, ip = pool[n % size]
        requests.append(({name.decode(): value.decode() for name, value in raw}, ip.decode()))
    return requests


def build_subjects(seed: int, pool_size: int):
    """The policy, its 19 more lanes and the pool of requests: the same for the same seed."""
    rnd = random.Random(seed)
    policy = build_policy(rnd)
    lanes = build_lanes(rnd, LANES - 1)
    return policy, lanes, build_pool(rnd, policy, pool_size)


def use_compiled(compiled: bool) -> bool:
    """Matchers built from now on use the C primitives (routing_engine/_speedups.c) or the
    pure Python ones; False if the C ones were asked for and are not built."""
    matcher.speedups = matcher._compiled() if compiled else None
    return compiled == (matcher.speedups is not None)


def build_matchers(policy: dict, lanes: dict, compiled: bool) -> tuple[GrayMatcher, ...]:
    """GrayMatcher of the policy, of it at percent=10 and with the lanes, C or pure Python."""
    use_compiled(compiled)
    return (GrayMatcher(policy), GrayMatcher({**policy, "percent": 10}),
            GrayMatcher(policy, {}, lanes))  # fmt: skip


# -- counted by callgrind ----------------------------------------------------------------------


def decoded_only(raw, ip) -> None:
    """The floor of a counted decision: the request's headers and address decoded from the
    bytes an HTTP parser reads, into new objects, as before each decision."""
    {name.decode(): value.decode() for name, value in raw}  # noqa: B018
    ip.decode()


def decoded_and_decided(subject: GrayMatcher) -> Callable:
    """The same, then the decision as a gateway pays it: pick_headers + decide. So the
    request's objects are new and fresh in the cache, as a gateway's just-parsed request."""
    decide, pick = subject.decide, subject.pick_headers

    def call(raw, ip) -> None:
        headers = {name.decode(): value.decode() for name, value in raw}
        decide(pick(headers), ip.decode())

    return call


COUNTED_SETUP = """
from bench import engine
policy, lane_rules, pool = engine.build_subjects({seed}, {count})
matchers = engine.build_matchers(policy, lane_rules, {compiled})
calls = pool
"""
KINDS = ("reference", "percent=10", f"{LANES} lanes")


def count_decisions(
    seed: int, count: int, implementations: tuple[bool, ...]
) -> dict[tuple[bool, str], instructions.Counted]:
    """Instructions and LL misses per decision of the reference policy, percent=10 and 20
    lanes, compiled (True) and pure Python (False), over `count` requests of the pool, each
    decoded anew (that floor taken off). Each implementation in a process of its own (only
    its matchers in the simulated cache, as in a gateway), the two at once."""

    def count_one(compiled: bool) -> dict[str, instructions.Counted]:
        functions = {kind: f"engine.decoded_and_decided(matchers[{n}])"
                     for n, kind in enumerate(KINDS)}  # fmt: skip
        setup = COUNTED_SETUP.format(seed=seed, count=count, compiled=compiled)
        return instructions.per_call(setup, functions, count, floor="engine.decoded_only")

    with ThreadPoolExecutor(len(implementations)) as pool:
        counted = dict(zip(implementations, pool.map(count_one, implementations), strict=True))
    return {(compiled, kind): counted[compiled][kind] for compiled in implementations
            for kind in KINDS}  # fmt: skip


# -- timing ------------------------------------------------------------------------------------


class Timing:
    """Per-decision wall and CPU µs of each pass."""

    def __init__(self, name: str):
        self.name, self.wall, self.cpu, self.decisions = name, [], [], 0

    def add(self, elapsed: Clock, decisions: int) -> None:
        self.wall.append(elapsed.wall / decisions * 1e6)
        self.cpu.append(elapsed.cpu / decisions * 1e6)
        self.decisions += decisions

    @property
    def median(self) -> float:
        return statistics.median(self.wall)

    def line(self) -> str:
        return (
            f"{self.name:<28}{self.median:>12.2f}{statistics.median(self.cpu):>12.2f}"
            f"{min(self.wall):>12.2f}   {len(self.wall)} passes, {self.decisions:,} decisions"
        )


def time_passes(
    name: str,
    decide: Callable,
    pool: list[RawRequest],
    per_pass: int,
    passes: int,
    offset: int,
    headers_of: Callable = lower_headers,
) -> Timing:
    """`passes` passes of `per_pass` decisions, each on the next slice of the pool as new
    objects; timed: headers_of (the normalisation) + decide, and the loop."""
    timing = Timing(name)
    for n in range(passes):
        requests = fresh_requests(pool, offset + n * per_pass, per_pass)
        gc.collect()
        start = Clock.now()
        for headers, ip in requests:
            decide(headers_of(headers), ip)
        timing.add(Clock.now().since(start), per_pass)
    return timing


def no_decision(headers, ip) -> None:
    """Times what every variant pays besides its decision: the normalisation, the call, the
    loop."""


def time_compile(policy: dict, builds: int) -> tuple[float, float]:
    """Median wall and CPU seconds of GrayMatcher(policy) over `builds` builds."""
    walls, cpus = [], []
    for _ in range(builds):
        gc.collect()
        start = Clock.now()
        GrayMatcher(policy)
        elapsed = Clock.now().since(start)
        walls.append(elapsed.wall)
        cpus.append(elapsed.cpu)
    return statistics.median(walls), statistics.median(cpus)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer passes and requests")
    parser.add_argument("--seed", type=int, default=996)
    parser.add_argument("--pool", type=int, default=10_000, help="distinct requests (10,000)")
    parser.add_argument("--passes", type=int, help="passes per variant (25; quick: 7)")
    parser.add_argument(
        "--no-valgrind", action="store_true", help="without the instruction counts (callgrind)"
    )
    args = parser.parse_args()
    # per pass: decisions of the fast variants, of the list scan; passes of the list scan;
    # GrayMatcher builds for the compile time.
    per_pass, scanned, scan_passes, builds = (
        (10_000, 100, 3, 3) if args.quick else (20_000, 300, 7, 7)
    )
    passes = args.passes or (7 if args.quick else 25)

    counting = None if args.no_valgrind else instructions.available()
    if counting is not None:
        raise SystemExit(f"{counting} (or pass --no-valgrind)")
    # The C primitives first (the engine's default), then the pure Python fallback.
    implementations = (True, False) if use_compiled(True) else (False,)
    if implementations == (False,):
        print("routing_engine._speedups is not built (make install): pure Python only")
    start = Clock.now()
    policy, lane_rules, pool = build_subjects(args.seed, args.pool)
    subjects = {compiled: build_matchers(policy, lane_rules, compiled)
                for compiled in implementations}  # fmt: skip
    built = Clock.now().since(start)
    compiles = {}
    for compiled in implementations:
        use_compiled(compiled)
        compiles[compiled] = time_compile(policy, builds)
    scan = ListScan(policy)
    naive = NaiveSetBisect(policy)
    entries = len(policy["users"]) + len(policy["ips"]) + len(policy["cities"])

    print(
        f"policy: {len(policy['users']):,} users, {len(policy['ips']):,} IP rules, "
        f"{len(policy['cities'])} cities = {entries:,} list entries; "
        f"built with the matchers and requests in {built.wall:.2f} s"
    )
    requests = fresh_requests(pool, 0, len(pool))
    ours = subjects[implementations[0]][0]
    decisions = [ours.decide(ours.pick_headers(headers), ip) for headers, ip in requests]
    flags = [decision.flag for decision in decisions]
    print(
        f"requests: a pool of {len(pool):,} distinct, {flags.count(GRAY) / len(pool):.1%} gray,"
        f" {len(requests[0][0])}-{max(len(h) for h, _ in requests)} headers each; "
        f"each pass decodes new objects from the next slice"
    )
    # The variants must agree, or the comparison means nothing; C and pure Python on every
    # matcher.
    for (headers, ip), expected in zip(requests, flags, strict=True):
        lowered = lower_headers(headers)
        assert naive.decide(lowered, ip) == expected, (headers, ip)
    for (headers, ip), expected in zip(requests[: scanned * 2], flags, strict=False):
        assert scan.decide(lower_headers(headers), ip) == expected, (headers, ip)
    for variants in zip(*subjects.values(), strict=True):
        for headers, ip in requests:
            answers = {each.decide(each.pick_headers(headers), ip) for each in variants}
            assert len(answers) == 1, (headers, ip, answers)
    del requests, decisions, flags

    # The slow scan takes its requests from the end of the pool, the others from its start.
    offset = len(pool) // 2
    timings: dict[object, Timing] = {
        "scan": time_passes("(a) list scan, int masks", scan.decide, pool, scanned, scan_passes,
                            offset),
        "naive": time_passes("(b) naive set + bisect", naive.decide, pool, per_pass, passes, 0),
    }  # fmt: skip
    for compiled in implementations:
        label = "C" if compiled else "pure Python"
        for kind, subject in zip(KINDS, subjects[compiled], strict=True):
            name = f"(c) GrayMatcher, {label}" if kind == "reference" else f"    ... {kind}"
            timings[compiled, kind] = time_passes(
                name, subject.decide, pool, per_pass, passes, 0, subject.pick_headers
            )
        timings[compiled, "pick"] = time_passes(
            "    pick_headers + loop", no_decision, pool, per_pass, passes, 0,
            subjects[compiled][0].pick_headers,
        )  # fmt: skip
    timings["lower"] = time_passes(
        "    lower_headers + loop", no_decision, pool, per_pass, passes, 0
    )
    scan_t = timings["scan"]
    print()
    print("µs per decision, the header normalisation + decide(), median of passes:")
    print(f"{'':<28}{'wall':>12}{'CPU':>12}{'min wall':>12}")
    for timing in timings.values():
        print(timing.line())
    for compiled, (compile_wall, compile_cpu) in compiles.items():
        print(
            f"compile GrayMatcher(policy), {'C' if compiled else 'pure Python'}, median of "
            f"{builds}: {compile_wall * 1e3:.0f} ms wall, {compile_cpu * 1e3:.0f} ms CPU = "
            f"{compile_wall / entries * 1e6:.2f} µs wall ({compile_cpu / entries * 1e6:.2f} µs "
            "CPU) per list entry"
        )
    ours_t = timings[implementations[0], "reference"]
    lanes_t = timings[implementations[0], KINDS[2]]
    compile_us = compiles[implementations[0]][0] / entries * 1e6
    ratio = scan_t.median / ours_t.median
    cpu_ratio = statistics.median(scan_t.cpu) / statistics.median(ours_t.cpu)
    print()
    print(
        f"targets ({'C' if implementations[0] else 'pure Python'}): decision ≤ 1 µs: "
        f"{'met' if ours_t.median <= TARGET_DECISION_US else 'MISSED'} ({ours_t.median:.2f} µs); "
        f"compile ≤ 1 µs per entry: "
        f"{'met' if compile_us <= TARGET_COMPILE_US_PER_ENTRY else 'MISSED'} ({compile_us:.2f} µs);"
        f" ≥ {TARGET_RATIO:,}× the list scan: {'met' if ratio >= TARGET_RATIO else 'MISSED'}"
    )
    lanes_ratio = lanes_t.median / ours_t.median
    lanes_met = "met" if lanes_ratio <= TARGET_LANES_RATIO else "MISSED"
    print(
        f"{LANES} lanes (each a header, CIDRs, users and a percent) vs the gray lane alone: "
        f"{lanes_t.median:.2f} vs {ours_t.median:.2f} µs = {lanes_ratio:.2f}× "
        f"(CPU {statistics.median(lanes_t.cpu) / statistics.median(ours_t.cpu):.2f}×; "
        f"target ≤ {TARGET_LANES_RATIO}: {lanes_met})"
    )
    if not args.no_valgrind:
        print_counted(count_decisions(args.seed, COUNTED, implementations), timings)
    print(
        f"ours {ours_t.median:.2f} µs vs list scan with integer masks {scan_t.median:,.0f} µs "
        f"per decision (CPU: {cpu_ratio:,.0f}×): {ratio:,.0f}×"
    )


def print_counted(
    counted: dict[tuple[bool, str], instructions.Counted], timings: dict[object, Timing]
) -> None:
    """The callgrind figures beside the timed ones, and their targets."""
    print()
    print(
        f"per decision, counted by callgrind over {COUNTED:,} requests (the same on any "
        "machine; LL: an 8 MiB 16-way last level), beside the timed medians:"
    )
    print(f"{'':<28}{'instructions':>14}{'LL misses':>12}{'µs wall':>10}{'µs CPU':>10}")
    for (compiled, kind), figure in counted.items():
        timing = timings[compiled, kind]
        name = f"{kind}, {'C' if compiled else 'pure Python'}"
        print(
            f"{name:<28}{figure.instructions:>14,.0f}{figure.ll_misses:>12.1f}"
            f"{timing.median:>10.2f}{statistics.median(timing.cpu):>10.2f}"
        )
    met = {True: "met", False: "MISSED"}
    for compiled in dict.fromkeys(compiled for compiled, _ in counted):
        reference = counted[compiled, "reference"].instructions
        percent = counted[compiled, "percent=10"].instructions / reference
        lanes = counted[compiled, f"{LANES} lanes"].instructions / reference
        print(
            f"targets (instructions), {'C' if compiled else 'pure Python'}: reference ≤ 1/3 of "
            f"{TODAY_INSTRUCTIONS:,} (a8954e8) = {TARGET_INSTRUCTIONS:,.0f}: "
            f"{met[reference <= TARGET_INSTRUCTIONS]} ({reference:,.0f}, "
            f"{reference / TODAY_INSTRUCTIONS:.2f}× a8954e8); percent=10 ≤ "
            f"{TARGET_PERCENT_INSTRUCTIONS}× the reference: "
            f"{met[percent <= TARGET_PERCENT_INSTRUCTIONS]} ({percent:.2f}×); {LANES} lanes ≤ "
            f"{TARGET_LANES_RATIO}× the reference: {met[lanes <= TARGET_LANES_RATIO]} "
            f"({lanes:.2f}×)"
        )


if __name__ == "__main__":
    main()
