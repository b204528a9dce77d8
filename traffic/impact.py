"""What a draft of the policy and lanes would do to the sampled requests: the version each
would get now and under the draft, decided by the gateway's own engine, and how many each
rule entry of the draft matches.

Real traffic repeats: the same user comes from the same address and city with the same
headers many times a minute. So the samples are first grouped by what a decision reads
(service, IP, user, city, the rule headers) and each distinct input is decided once per
document; a rule entry is matched once per distinct address, city, user or header set. The
cost follows the number of distinct inputs, the grouping aside (bench/preview.py)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from socket import AF_INET, AF_INET6, inet_pton
from typing import Any

from policy.lanes import gray_priority_of, lanes_of
from policy.models import PolicyState
from policy.simulation import caller_city, compile_matcher, hop, instances_of, matcher_for
from routing_engine import Decision, GrayMatcher, user_bucket
from routing_engine.cities import city_keys
from routing_engine.lanes import BUCKETS, GRAY_LANE, lane_order, lane_rank
from routing_engine.matcher import ip_ranges
from routing_engine.policy import percent_threshold
from traffic.samples import TrafficSample
from traffic.store import store

# The share key of requests that may reach any version (the policy switched off, or gray
# routing off): no version is asked for.
ANY_VERSION = "*"
# ::ffff:a.b.c.d is matched as a.b.c.d, as the matcher does.
_V4_MAPPED = bytes(10) + b"\xff\xff"

# What a decision reads of a sample: (service, ip, user, city, rule headers as items).
Input = tuple[str, str, str | None, str | None, tuple[tuple[str, str], ...]]


def input_of(sample: TrafficSample) -> Input:
    headers = sample.headers
    return (
        sample.service,
        sample.ip,
        sample.user,
        sample.city,
        tuple(headers.items()) if headers else (),
    )


def group(samples: Iterable[TrafficSample]) -> Counter[Input]:
    """How many samples there are of each distinct decision input."""
    return Counter(map(input_of, samples))


class Decider:
    """One document (the live one or the draft) deciding the distinct inputs with the
    gateway's matcher, and the version a decision gets at a service (looked up once per
    service and decision: it follows from the document and the service's instances)."""

    def __init__(
        self,
        document: dict[str, Any],
        matcher: GrayMatcher,
        instances: Mapping[str, list[dict[str, Any]]],
    ):
        self.document = document
        self.matcher = matcher
        self.instances = instances
        # service -> (its decide(), version by (flag, lane)).
        self._services: dict[str, tuple[Callable[..., Decision], dict[tuple, str]]] = {}

    def city(self, headers: Mapping[str, str], ip: str) -> str | None:
        """The city of a sample whose gateway found none: as simulate() finds one."""
        return caller_city(self.document, headers, ip or None)

    def version(self, service: str, headers: Mapping[str, str], ip: str, city: str | None,
                user: str | None) -> str:  # fmt: skip
        known = self._services.get(service)
        if known is None:
            known = self._services[service] = (self.matcher.for_service(service), {})
        decide, versions = known
        # Positional, as decide(headers, ip, city, user): a keyword call costs more.
        decision = decide(headers, ip or None, city or "", user or None)
        key = (decision.flag, decision.lane)
        version = versions.get(key)
        if version is None:
            answer = hop(self.document, service, decision, self.instances.get(service, []))
            version = versions[key] = answer["version"] or ANY_VERSION
        return version


def impact(
    live: dict[str, Any],
    draft: dict[str, Any],
    inputs: Counter[Input],
    instances: Mapping[str, list[dict[str, Any]]],
    *,
    live_matcher: GrayMatcher | None = None,
) -> dict[str, Any]:
    """`services` and `rules` of a preview (docs/api.md, "Impact preview") of the grouped
    samples `inputs`; `instances` are the services' as simulation.instances_of reads them."""
    now = Decider(live, live_matcher or compile_matcher(live), instances)
    then = Decider(draft, compile_matcher(draft), instances)
    rules = RuleIndex(draft)
    user_key = rules.user_key
    # (service, version now, version under the draft) -> samples; service -> users moved.
    pairs: Counter[tuple[str, str, str]] = Counter()
    moved_users: dict[str, set[str]] = {}
    # What each kind of rule reads, counted on its own: an entry is matched per distinct
    # address, city, user or header set, not per distinct input.
    ips: Counter[str] = Counter()
    cities: Counter[str | None] = Counter()
    users: Counter[str | None] = Counter()
    header_sets: Counter[tuple[tuple[str, str], ...]] = Counter()
    for (service, ip, user, city, header_items), count in inputs.items():
        headers = dict(header_items) if header_items else {}
        if city is None:
            live_city, draft_city = now.city(headers, ip), then.city(headers, ip)
        else:
            live_city = draft_city = city
        before = now.version(service, headers, ip, live_city, user)
        after = then.version(service, headers, ip, draft_city, user)
        pairs[service, before, after] += count
        if not user and headers:
            user = headers.get(user_key)
        if before != after and user:
            moved_users.setdefault(service, set()).add(user)
        ips[ip] += count
        cities[draft_city] += count
        users[user] += count
        if header_items:
            header_sets[header_items] += count
    rules.count(ips, cities, users, header_sets)
    by_service: dict[str, _ServiceCounts] = {}
    for (service, before, after), count in pairs.items():
        counts = by_service.get(service)
        if counts is None:
            counts = by_service[service] = _ServiceCounts()
        counts.add(before, after, count)
    return {
        "services": {
            name: by_service[name].payload(len(moved_users.get(name, ())))
            for name in sorted(by_service)
        },
        "rules": rules.payload(),
    }


@dataclass
class _ServiceCounts:
    requests: int = 0
    now: Counter[str] = field(default_factory=Counter)
    draft: Counter[str] = field(default_factory=Counter)
    moved: int = 0

    def add(self, before: str, after: str, count: int) -> None:
        self.requests += count
        self.now[before] += count
        self.draft[after] += count
        if before != after:
            self.moved += count

    def payload(self, users_moved: int) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "now": self._shares(self.now),
            "draft": self._shares(self.draft),
            "moved": round(self.moved / self.requests, 6),
            "users_moved": users_moved,
        }

    def _shares(self, counts: Counter[str]) -> dict[str, float]:
        return {version: round(n / self.requests, 6) for version, n in sorted(counts.items())}


@dataclass
class _Rule:
    lane: str
    rule: str
    value: str | int | float
    matched: int = 0


def _address(ip: str) -> tuple[int, int] | None:
    """(bits, integer) of an address, an IPv4-mapped IPv6 one as IPv4; None: not one."""
    try:
        if ":" not in ip:
            return 32, int.from_bytes(inet_pton(AF_INET, ip))
        packed = inet_pton(AF_INET6, ip)
    except (OSError, ValueError):
        return None
    if packed[:12] == _V4_MAPPED:
        return 32, int.from_bytes(packed[12:])
    return 128, int.from_bytes(packed)


class RuleIndex:
    """Every list entry of every lane that routes under a document (the gray lane's when
    the policy is on, the enabled lanes'), each with how many samples it matched: whether
    or not an earlier rule or lane decided them, and whichever service they entered at."""

    def __init__(self, document: dict[str, Any]):
        self.rules: list[_Rule] = []
        gray = document["gray"]
        self.user_key = gray["user_header"].lower()
        self.headers: dict[str, dict[str, list[_Rule]]] = {}
        # (address bits, host bits) -> network number (address >> host bits) -> rules.
        self.networks: dict[tuple[int, int], dict[int, list[_Rule]]] = {}
        self.cities: dict[str, list[_Rule]] = {}
        self.users: dict[str, list[_Rule]] = {}
        # (rule, buckets taken, the lane's rank of a bucket).
        self.percents: list[tuple[_Rule, int, tuple[int, ...]]] = []
        if not gray["enabled"]:
            return
        lanes = lanes_of(document)
        for name in lane_order(lanes, gray_priority_of(document)):
            self._add(name, gray if name == GRAY_LANE else lanes[name]["match"])

    def _rule(self, lane: str, kind: str, value: str | int | float) -> _Rule:
        rule = _Rule(lane, kind, value)
        self.rules.append(rule)
        return rule

    def _add(self, lane: str, match: Mapping[str, Any]) -> None:
        header = match["header"]
        if header["name"]:
            rule = self._rule(lane, "header", f"{header['name']}: {header['value']}")
            values = self.headers.setdefault(header["name"].lower(), {})
            values.setdefault(header["value"], []).append(rule)
        for entry in match["ips"]:
            rule = self._rule(lane, "ip", entry)
            v4, v6 = ip_ranges([entry])
            for bits, ranges in ((32, v4), (128, v6)):
                for first, last in ranges:
                    host_bits = (last - first + 1).bit_length() - 1
                    networks = self.networks.setdefault((bits, host_bits), {})
                    networks.setdefault(first >> host_bits, []).append(rule)
        for entry in match["cities"]:
            rule = self._rule(lane, "city", entry)
            for key in city_keys(entry):
                self.cities.setdefault(key, []).append(rule)
        for entry in match["users"]:
            self.users.setdefault(entry, []).append(self._rule(lane, "user", entry))
        threshold = percent_threshold(match["percent"])
        if threshold:
            rule = self._rule(lane, "percent", match["percent"])
            self.percents.append((rule, threshold, lane_rank(lane)))

    def count(
        self,
        ips: Mapping[str, int],
        cities: Mapping[str | None, int],
        users: Mapping[str | None, int],
        header_sets: Mapping[tuple[tuple[str, str], ...], int],
    ) -> None:
        """Count samples against every entry, from how many there are of each address,
        city, user (the user header's when the sample has no user) and set of headers."""
        for header_items, n in header_sets.items():
            for name, value in header_items:
                for rule in self.headers.get(name, {}).get(value, ()):
                    rule.matched += n
        if self.networks:
            for ip, n in ips.items():
                for rule in self._ip_rules(ip):
                    rule.matched += n
        for city, n in cities.items():
            if city is not None:
                for rule in self.cities.get(city.strip().casefold(), ()):
                    rule.matched += n
        everyone = sum(users.values())
        for rule, threshold, _rank in self.percents:
            if threshold == BUCKETS:
                rule.matched += everyone  # 100 % takes every request, one without a user too
        for user, n in users.items():
            if not user:
                continue
            for rule in self.users.get(user, ()):
                rule.matched += n
            if self.percents:
                bucket = user_bucket(user)
                for rule, threshold, rank in self.percents:
                    if threshold < BUCKETS and rank[bucket] < threshold:
                        rule.matched += n

    def _ip_rules(self, ip: str) -> Iterable[_Rule]:
        address = _address(ip)
        if address is None:
            return
        bits, number = address
        for (family, host_bits), networks in self.networks.items():
            if family == bits:
                yield from networks.get(number >> host_bits, ())

    def payload(self) -> list[dict[str, Any]]:
        return [
            {"lane": r.lane, "rule": r.rule, "value": r.value, "matched": r.matched}
            for r in self.rules
        ]


def preview(state: PolicyState, draft: dict[str, Any]) -> dict[str, Any]:
    """The impact preview of `draft` (a whole document, policy.proposals) against the live
    `state` over the sample store's window (docs/api.md, "Impact preview")."""
    samples = store()
    inputs = group(samples.window(ordered=False))
    instances = instances_of({service for service, *_ in inputs})
    result = impact(state.document, draft, inputs, instances, live_matcher=matcher_for(state))
    return {"window_s": samples.window_seconds, "samples": inputs.total(), **result}
