"""The gray decision: which requests go to the gray version.

GrayMatcher is built once per policy revision and then asked once per request, so
everything that can be is precomputed at build time. No rule list is ever scanned:
users and cities live in frozensets, and the IP rules of each family are collapsed
into disjoint sorted ranges searched with a single bisect (for IPv4, only the few
ranges within the address's /16 block).
"""

from __future__ import annotations

import ipaddress
import zlib
from bisect import bisect_right
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from socket import AF_INET, AF_INET6, inet_pton
from typing import Any

ALL = "ALL"
PROD = "PROD"
GRAY = "GRAY"
FLAGS = frozenset((ALL, PROD, GRAY))
GRAY_STATUS_HEADER = "X-Gray-Status"

# Users are bucketed into 0.01 % slices so that `percent` maps to a whole number of them.
_BUCKETS = 10_000

# Addresses ::ffff:a.b.c.d (IPv4-mapped IPv6) are matched against the IPv4 rules.
_V4_MAPPED = bytes(10) + b"\xff\xff"


@dataclass(frozen=True, slots=True)
class Decision:
    flag: str
    matched: str | None  # "header", "ip", "city", "user", "percent" or None


# Decisions are immutable, so decide() hands out these instead of allocating.
_ALL = Decision(ALL, None)
_PROD = Decision(PROD, None)
_BY_HEADER = Decision(GRAY, "header")
_BY_IP = Decision(GRAY, "ip")
_BY_CITY = Decision(GRAY, "city")
_BY_USER = Decision(GRAY, "user")
_BY_PERCENT = Decision(GRAY, "percent")


def lower_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """Header names are case-insensitive; decide() expects them lower-cased."""
    return {name.lower(): value for name, value in headers.items()}


def user_bucket(user: str) -> int:
    """Stable slice 0..9999 of a user id, the same in every process.

    CRC-32 rather than a cryptographic hash: it is 7x cheaper on the request path and
    spreads numeric and textual ids evenly (see the spread test); nobody gains from
    steering their own id into gray.
    """
    return zlib.crc32(user.encode("utf-8", "surrogatepass")) % _BUCKETS


def service_seed(service: str) -> int:
    """The CRC-32 state after `service` and a NUL: the salt of service_bucket."""
    return zlib.crc32(service.encode("utf-8", "surrogatepass") + b"\0")


def service_bucket(service: str, user: str, seed: int | None = None) -> int:
    """Stable slice 0..9999 of a user id for one service: CRC-32 of service, NUL, user.

    Salted per service so that the users in gray for one service's release are not the
    same users as for another's (each release gets its own sample), and still one number
    per (service, user): a user below the threshold at 5 % is below it at 25 % (sticky and
    monotonic). `seed` is service_seed(service), precomputed by the matcher.
    """
    if seed is None:
        seed = service_seed(service)
    return zlib.crc32(user.encode("utf-8", "surrogatepass"), seed) % _BUCKETS


def ip_ranges(entries: Iterable[str]) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """Disjoint, sorted, non-adjacent (first, last) address ranges: IPv4, then IPv6."""
    v4: list[ipaddress.IPv4Network] = []
    v6: list[ipaddress.IPv6Network] = []
    for entry in entries:
        network = ipaddress.ip_network(entry, strict=False)
        if isinstance(network, ipaddress.IPv4Network):
            v4.append(network)
        elif network.prefixlen >= 96 and network.network_address.packed[:12] == _V4_MAPPED:
            mapped = network.network_address.packed[12:]
            v4.append(ipaddress.IPv4Network((mapped, network.prefixlen - 96)))
        else:
            v6.append(network)
    return _merged(v4), _merged(v6)


def _merged(networks: list) -> list[tuple[int, int]]:
    ranges: list[tuple[int, int]] = []
    for network in ipaddress.collapse_addresses(networks):
        first, last = int(network.network_address), int(network.broadcast_address)
        if ranges and ranges[-1][1] + 1 == first:
            # collapse_addresses keeps adjacent blocks apart when they form no CIDR.
            ranges[-1] = (ranges[-1][0], last)
        else:
            ranges.append((first, last))
    return ranges


def _bounds(ranges: list[tuple[int, int]]) -> list[int]:
    """[first0, stop0, first1, stop1, ...] where `stop` is the address after a range.

    An address is covered exactly when bisect_right() lands on an odd index: one
    bisect, no second lookup.
    """
    return [bound for first, last in ranges for bound in (first, last + 1)]


def _v4_blocks(ranges: list[tuple[int, int]]) -> list[list[int] | None]:
    """Per IPv4 /16 block: None if no rule touches it, else the _bounds of the matching
    ranges within it, as offsets 0..65536 from the start of the block.

    With thousands of rules, one bisect over all of them walks a large list whose
    steps tend to miss the CPU cache; with this table most addresses are settled by
    one list index and the rest by a bisect over a few small ints (less time per
    decision in bench/engine.py; the figure is in bench/README.md).
    """
    blocks: list[list[int] | None] = [None] * 0x10000
    for first, last in ranges:
        for block in range(first >> 16, (last >> 16) + 1):
            base = block << 16
            offsets = blocks[block]
            if offsets is None:
                offsets = blocks[block] = []
            offsets += (max(first, base) - base, min(last, base | 0xFFFF) - base + 1)
    return blocks


class GrayMatcher:
    """The reference design's gateway filter decision (GrayGatewayBeginFilter), compiled from
    a normalised policy (docs/gray-release-design.md).

    Accepts the full policy or the gateway document's "gray" section (no "versions").
    Call ``matcher.decide(headers, ip=None, city=None, user=None) -> Decision``:
    `headers` must have lower-case names (see lower_headers); `city` and `user`
    default to the values of the policy's city and user headers. Rules are tried in
    the reference design's order: header, IP, city, user, then percent.

    `services` (optional) maps service names to their routing overrides: `percent`
    (0-100, sticky by service_bucket, replacing the policy's percent for that service)
    and `targeted` (false: the header, IP, city and user rules send none of that service's
    requests to gray). ``matcher.for_service(name)`` is the decide function of that
    service; services without an override share ``decide``.
    """

    __slots__ = ("decide", "_services")
    decide: Callable[..., Decision]

    def __init__(
        self, policy: Mapping[str, Any], services: Mapping[str, Mapping[str, Any]] | None = None
    ):
        # decide() is a closure over precomputed locals: it runs once per request and
        # reading closure cells is markedly cheaper than reading attributes of self.
        self.decide, self._services = _compile(policy, services or {})

    def for_service(self, service: str) -> Callable[..., Decision]:
        return self._services.get(service, self.decide)


def service_routing(override: Mapping[str, Any]) -> tuple[int | None, bool]:
    """(percent or None to inherit the policy's, targeted) of a service's override."""
    percent = override.get("percent")
    targeted = override.get("targeted")
    return (None if percent is None else int(percent)), targeted is not False


def _decide_disabled(
    headers: Mapping[str, str],
    ip: str | None = None,
    city: str | None = None,
    user: str | None = None,
) -> Decision:
    return _ALL


def _compile(
    policy: Mapping[str, Any], services: Mapping[str, Mapping[str, Any]]
) -> tuple[Callable[..., Decision], dict[str, Callable[..., Decision]]]:
    if not policy["enabled"]:
        return _decide_disabled, {}
    rules = _Rules(policy)
    default = rules.decider(int(policy["percent"]), targeted=True, seed=None)
    own = {}
    for name, override in services.items():
        percent, targeted = service_routing(override)
        if percent is None and targeted:
            continue
        if percent is None:
            percent, seed = int(policy["percent"]), None
        else:
            seed = service_seed(name)
        own[name] = rules.decider(percent, targeted=targeted, seed=seed)
    return default, own


class _Rules:
    """The policy's targeted rules, compiled once and shared by every service's decider."""

    def __init__(self, policy: Mapping[str, Any]):
        self.header_key = policy["header"]["name"].lower() or None
        self.header_value = policy["header"]["value"]
        v4_ranges, v6_ranges = ip_ranges(policy["ips"])
        self.has_ips = bool(v4_ranges or v6_ranges)
        self.v4_blocks = _v4_blocks(v4_ranges)
        self.v6_bounds = _bounds(v6_ranges)
        self.cities = frozenset(city.strip().casefold() for city in policy["cities"])
        self.users = frozenset(policy["users"])
        self.city_key = policy["city_header"].lower()
        self.user_key = policy["user_header"].lower()

    def decider(self, percent: int, *, targeted: bool, seed: int | None) -> Callable[..., Decision]:
        """decide() for `percent` sticky by user_bucket (seed None: the policy-wide
        percent, unsalted as it always was) or by service_bucket with `seed`."""
        header_key = self.header_key if targeted else None
        header_value = self.header_value
        has_ips = self.has_ips and targeted
        v4_blocks = self.v4_blocks
        v6_bounds = self.v6_bounds
        cities = self.cities if targeted else frozenset()
        users = self.users if targeted else frozenset()
        city_key = self.city_key
        user_key = self.user_key
        threshold = percent * (_BUCKETS // 100)
        everyone = threshold == _BUCKETS
        crc32 = zlib.crc32

        def decide(
            headers: Mapping[str, str],
            ip: str | None = None,
            city: str | None = None,
            user: str | None = None,
        ) -> Decision:
            if header_key is not None and headers.get(header_key) == header_value:
                return _BY_HEADER
            if has_ips and ip is not None:
                try:
                    if ":" not in ip:
                        packed = inet_pton(AF_INET, ip)
                    else:
                        packed = inet_pton(AF_INET6, ip)
                        if packed[:12] != _V4_MAPPED:
                            if bisect_right(v6_bounds, int.from_bytes(packed)) & 1:
                                return _BY_IP
                            packed = None
                except (OSError, TypeError, ValueError):
                    packed = None  # not an address: it matches no rule
                if packed is not None:
                    # The last four bytes: the IPv4 address, also when IPv4-mapped IPv6.
                    offsets = v4_blocks[packed[-4] << 8 | packed[-3]]
                    if (
                        offsets is not None
                        and bisect_right(offsets, packed[-2] << 8 | packed[-1]) & 1
                    ):
                        return _BY_IP
            if cities:
                if city is None:
                    city = headers.get(city_key)
                if city is not None and city.strip().casefold() in cities:
                    return _BY_CITY
            if users or threshold:
                if user is None:
                    user = headers.get(user_key)
                if user:
                    if user in users:
                        return _BY_USER
                    if threshold:
                        encoded = user.encode("utf-8", "surrogatepass")
                        bucket = (crc32(encoded) if seed is None else crc32(encoded, seed)) % (
                            _BUCKETS
                        )
                        if bucket < threshold:
                            return _BY_PERCENT
                # 100 % means all traffic, including requests that carry no user id.
                if everyone:
                    return _BY_PERCENT
            return _PROD

        return decide
