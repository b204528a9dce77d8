"""Gray decision speed: the seed's list scan against routing_engine.GrayMatcher.

    .venv/bin/python bench/engine.py [--quick] [--seed N]

Policy: 100,000 users, 10,000 IP rules (IPv4 /8../32, mostly long prefixes, plus
IPv6), 300 cities and the seed's header rule. Requests: mostly misses, the worst case
for a scan because every list is walked to its end, and a share of hits of each kind.
Each variant is timed on the same stream, the slow scans only on its first requests;
the median of several repetitions counts. Times include the loop that feeds requests.
"""

from __future__ import annotations

import argparse
import ipaddress
import random
import statistics
import sys
import time
from bisect import bisect_right
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from routing_engine import (  # noqa: E402
    DEFAULT_POLICY,
    GRAY,
    PROD,
    GrayMatcher,
    lower_headers,
    normalize_policy,
)

USERS = 100_000
IPV4_RULES = 9_500
IPV6_RULES = 500
CITIES = 300
HIT_SHARE = 0.10


def ip_in_cidr(ip: str, cidr: str) -> bool:
    return ipaddress.ip_address(ip) in ipaddress.ip_network(cidr)


class SeedListScan:
    """The seed's checks: every rule list scanned per request.

    By default generous to the seed: CIDRs are parsed once up front, as a service
    parses its configuration once, so only `address in network` runs per entry.
    With `parse_per_entry`, ip_in_cidr(ip, cidr) parses both strings for every entry,
    as a naive port of a per-entry helper would.
    """

    def __init__(self, policy, parse_per_entry=False):
        self.header = (policy["header"]["name"].lower(), policy["header"]["value"])
        self.cidrs = list(policy["ips"])
        self.networks = [ipaddress.ip_network(entry) for entry in policy["ips"]]
        self.parse_per_entry = parse_per_entry
        self.cities = list(policy["cities"])
        self.users = list(policy["users"])
        self.city_key = policy["city_header"].lower()
        self.user_key = policy["user_header"].lower()

    def ip_matches(self, ip):
        try:
            if self.parse_per_entry:
                return any(ip_in_cidr(ip, cidr) for cidr in self.cidrs)
            address = ipaddress.ip_address(ip)
            return any(address in network for network in self.networks)
        except ValueError:
            return False

    def decide(self, headers, ip):
        name, value = self.header
        if headers.get(name) == value:
            return GRAY
        if self.ip_matches(ip):
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


def address_in(rnd: random.Random, rule: str) -> str:
    network = ipaddress.ip_network(rule)
    offset = rnd.randrange(network.num_addresses)
    return str(network.network_address + offset)


def build_requests(rnd: random.Random, policy: dict, count: int) -> list[tuple[dict, str]]:
    requests = []
    for _ in range(count):
        headers = {
            "Host": "gateway.local",
            "Accept": "application/json",
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
        requests.append((lower_headers(headers), ip))
    return requests


def time_per_decision(decide, requests, repeats: int) -> float:
    """Median µs per decision over `repeats` passes over `requests`."""
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        for headers, ip in requests:
            decide(headers, ip)
        samples.append((time.perf_counter() - start) / len(requests) * 1e6)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer requests and repetitions")
    parser.add_argument("--seed", type=int, default=996)
    args = parser.parse_args()
    stream, scanned, parsed, repeats = (20_000, 60, 5, 3) if args.quick else (100_000, 300, 30, 7)

    rnd = random.Random(args.seed)
    started = time.perf_counter()
    policy = build_policy(rnd)
    normalised = time.perf_counter()
    ours = GrayMatcher(policy)
    compiled = time.perf_counter()
    seed = SeedListScan(policy)
    seed_parsing = SeedListScan(policy, parse_per_entry=True)
    naive = NaiveSetBisect(policy)
    requests = build_requests(rnd, policy, stream)

    print(
        f"policy: {len(policy['users']):,} users, {len(policy['ips']):,} IP rules, "
        f"{len(policy['cities'])} cities; normalise {normalised - started:.2f} s, "
        f"compile {compiled - normalised:.2f} s"
    )
    gray = sum(ours.decide(headers, ip).flag == GRAY for headers, ip in requests)
    print(f"requests: {len(requests):,}, {gray / len(requests):.1%} gray")
    # The variants must agree, or the comparison means nothing.
    for headers, ip in requests[:scanned]:
        expected = ours.decide(headers, ip).flag
        assert seed.decide(headers, ip) == naive.decide(headers, ip) == expected, (headers, ip)
    for headers, ip in requests[:parsed]:
        assert seed_parsing.decide(headers, ip) == ours.decide(headers, ip).flag, (headers, ip)

    parsing_us = time_per_decision(seed_parsing.decide, requests[:parsed], 1)
    seed_us = time_per_decision(seed.decide, requests[:scanned], max(1, repeats // 2))
    naive_us = time_per_decision(naive.decide, requests, repeats)
    ours_us = time_per_decision(ours.decide, requests, repeats)
    percent_us = time_per_decision(GrayMatcher({**policy, "percent": 10}).decide, requests, repeats)
    print(f"(a') seed scan, parsing   {parsing_us:12.2f} µs/decision  ({parsed} requests)")
    print(f"(a) seed list scan       {seed_us:12.2f} µs/decision  ({scanned} requests)")
    print(f"(b) naive set + bisect   {naive_us:12.2f} µs/decision")
    print(f"(c) GrayMatcher.decide   {ours_us:12.2f} µs/decision")
    print(f"    ... with percent=10  {percent_us:12.2f} µs/decision")
    print(f"ours vs seed scan parsing each entry: {parsing_us / ours_us:,.0f}×")
    print(f"ours vs seed list scan: {seed_us / ours_us:,.0f}×")


if __name__ == "__main__":
    main()
