"""The gray decision: which requests go to the gray version.

GrayMatcher is built once per policy revision and then asked once per request, so
everything that can be is precomputed at build time. No rule list is ever scanned:
users and cities live in frozensets, and the IP rules of each family are collapsed
into disjoint sorted ranges searched with a single bisect (for IPv4, only the few
ranges within the address's /16 block).
"""

from __future__ import annotations

import os
import zlib
from array import array
from bisect import bisect_right
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from socket import AF_INET, AF_INET6, inet_pton
from types import ModuleType
from typing import Any

from .cities import city_keys
from .lanes import GRAY_LANE, GRAY_PRIORITY, lane_order, lane_rank
from .policy import percent_threshold

ALL = "ALL"
PROD = "PROD"
GRAY = "GRAY"
FLAGS = frozenset((ALL, PROD, GRAY))
GRAY_STATUS_HEADER = "X-Gray-Status"

# Users are bucketed into 0.01 % slices so that `percent` maps to a whole number of them.
_BUCKETS = 10_000

# Addresses ::ffff:a.b.c.d (IPv4-mapped IPv6) are matched against the IPv4 rules.
_V4_MAPPED = bytes(10) + b"\xff\xff"


def _compiled() -> ModuleType | None:
    """The C primitives (routing_engine/_speedups.c, built by `make install`), or None: not
    built here, or GRAYLANE_PURE_PYTHON_ENGINE set. Either decides the same; the pure Python
    ones below are the fallback, and the engine's tests run both."""
    if os.environ.get("GRAYLANE_PURE_PYTHON_ENGINE", "").lower() not in ("", "0", "false"):
        return None
    try:
        from . import _speedups
    except ImportError:
        return None
    return _speedups


# Read when a matcher is built (tests switch it to run both implementations).
speedups = _compiled()


@dataclass(frozen=True, slots=True)
class Decision:
    flag: str
    matched: str | None  # "header", "ip", "city", "user", "percent" or None
    # The lane of a GRAY decision ("gray" unless another lane matched first); None otherwise.
    lane: str | None = None

    def __post_init__(self) -> None:
        if self.flag == GRAY and self.lane is None:
            object.__setattr__(self, "lane", GRAY_LANE)


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


# How many spellings of header names header_picker remembers: a client choosing a new one
# per request cannot grow it for ever.
_SPELLINGS = 4096


# How many spellings of the named headers pick() looks up directly; beyond that (a client
# trying spellings) every header is looked at, as when a spelling is new.
_DIRECT = 16


def header_picker(names: Iterable[str]) -> Callable[[Mapping[str, str]], dict[str, str]]:
    """pick(headers): the headers named in `names` (lower-case), lower-cased, of a request
    whose header names may be spelled in any case.

    Only the headers a decision reads are lower-cased, and each spelling once: which name a
    spelling is (or that it is none of them) is remembered. Once every header name of a
    request is a known spelling (one subset test, in C), the named ones are found by looking
    up their known spellings, not by a Python step per header of the request. Compiled:
    learn() for every request, in C."""
    wanted = frozenset(names)
    if speedups is not None:
        return speedups.HeaderPicker(wanted, _SPELLINGS)
    spellings: dict[str, str | None] = {}
    known = spellings.keys()
    # [((spelling, lower-case name), ...)]: the known spellings of the named headers.
    direct: list[tuple[tuple[str, str], ...]] = [()]

    def learn(headers: Mapping[str, str]) -> dict[str, str]:
        picked = {}
        for name, value in headers.items():
            # `in` and a subscript, not .get(): no method call, and the name's hash is computed
            # once for both.
            if name in spellings:
                lower = spellings[name]
                if lower is not None:
                    picked[lower] = value
                continue
            lower = name.lower()
            if lower not in wanted:
                lower = None
            if len(spellings) >= _SPELLINGS:
                spellings.clear()
            spellings[name] = lower
            if lower is not None:
                picked[lower] = value
        direct[0] = tuple(
            (spelling, lower) for spelling, lower in spellings.items() if lower is not None
        )
        return picked

    def pick(headers: Mapping[str, str]) -> dict[str, str]:
        if not headers.keys() <= known:
            return learn(headers)
        found = direct[0]
        if len(found) > _DIRECT:
            return learn(headers)
        picked = {}
        for spelling, lower in found:
            if spelling in headers:
                if lower in picked:
                    # Two spellings of one name: the later header wins, as in learn().
                    return learn(headers)
                picked[lower] = headers[spelling]
        return picked

    return pick


def utf8(text: str) -> bytes:
    """`text` in UTF-8, a lone surrogate too (a JSON client may send one). str.encode() with
    an error handler takes the codec's slow path, so only such a text goes there."""
    try:
        return text.encode()
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass")


def user_bucket(user: str) -> int:
    """Stable slice 0..9999 of a user id, the same in every process.

    CRC-32 rather than a cryptographic hash: it runs on every request, spreads numeric and
    textual ids evenly (see the spread test), and other engines have it (Envoy's Lua filter
    computes it too); nobody gains from steering their own id into gray.
    """
    return zlib.crc32(utf8(user)) % _BUCKETS


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
    return zlib.crc32(utf8(user), seed) % _BUCKETS


def ip_ranges(entries: Iterable[str]) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """Disjoint, sorted, non-adjacent (first, last) address ranges: IPv4, then IPv6.

    Entries are addresses or CIDRs (host bits ignored); an IPv4-mapped IPv6 one counts as
    IPv4. Parsed with inet_pton and integer masks, not ipaddress objects: a policy of 10,000
    CIDRs compiles in milliseconds (bench/engine.py, compile time per list entry)."""
    v4: list[tuple[int, int]] = []
    v6: list[tuple[int, int]] = []
    for entry in entries:
        address, _, prefix = entry.partition("/")
        try:
            if ":" in address:
                packed, bits = inet_pton(AF_INET6, address), 128
            else:
                packed, bits = inet_pton(AF_INET, address), 32
            length = int(prefix) if prefix else bits
        except (OSError, ValueError):
            raise ValueError(f"{entry!r} is not an IP address or CIDR") from None
        if not 0 <= length <= bits:
            raise ValueError(f"{entry!r} is not an IP address or CIDR")
        if bits == 128 and length >= 96 and packed[:12] == _V4_MAPPED:
            packed, bits, length = packed[12:], 32, length - 96
        host = (1 << (bits - length)) - 1
        first = int.from_bytes(packed) & ~host
        (v4 if bits == 32 else v6).append((first, first | host))
    return _merged(v4), _merged(v6)


def _merged(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for first, last in sorted(ranges):
        if merged and first <= merged[-1][1] + 1:
            # Overlapping or adjacent: one range.
            if last > merged[-1][1]:
                merged[-1] = (merged[-1][0], last)
        else:
            merged.append((first, last))
    return merged


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

    `lanes` (optional) are the other lanes, name -> lane as routing_engine.lanes normalises
    it, and `gray_priority` the gray lane's place among them: the first enabled lane (by
    priority, then name) whose rules match decides, and its name is the decision's `lane`.
    All lanes are decided at once: each rule kind is one lookup over every lane's entries
    (a bit per lane), never a pass per lane.
    """

    __slots__ = ("decide", "_services", "header_names", "pick_headers")
    decide: Callable[..., Decision]

    def __init__(
        self,
        policy: Mapping[str, Any],
        services: Mapping[str, Mapping[str, Any]] | None = None,
        lanes: Mapping[str, Mapping[str, Any]] | None = None,
        gray_priority: int = GRAY_PRIORITY,
    ):
        # decide() is a closure over precomputed locals: it runs once per request and
        # reading closure cells is markedly cheaper than reading attributes of self.
        enabled = {name: lane for name, lane in (lanes or {}).items() if lane.get("enabled", True)}
        # Compiled, the gray lane alone is decided as one lane too: one decider in C.
        if policy["enabled"] and (enabled or speedups is not None):
            self.decide, self._services = _compile_lanes(
                policy, services or {}, enabled, gray_priority
            )
        else:
            self.decide, self._services = _compile(policy, services or {})
        names = [policy["header"]["name"], policy["city_header"], policy["user_header"]]
        names += [lane["match"]["header"]["name"] for lane in enabled.values()]
        # The request headers a decision reads (lower-case), and pick_headers(headers): those
        # of a request's headers, in any spelling, the form decide() takes.
        self.header_names = frozenset(name.lower() for name in names if name)
        self.pick_headers = header_picker(self.header_names)

    def for_service(self, service: str) -> Callable[..., Decision]:
        return self._services.get(service, self.decide)


def service_routing(override: Mapping[str, Any]) -> tuple[int | float | None, bool]:
    """(percent or None to inherit the policy's, targeted) of a service's override."""
    percent = override.get("percent")
    targeted = override.get("targeted")
    return percent, targeted is not False


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
    default = rules.decider(policy["percent"], targeted=True, seed=None)
    own = {}
    for name, override in services.items():
        percent, targeted = service_routing(override)
        if percent is None and targeted:
            continue
        if percent is None:
            percent, seed = policy["percent"], None
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
        self.cities = frozenset(key for city in policy["cities"] for key in city_keys(city))
        self.users = frozenset(policy["users"])
        self.city_key = policy["city_header"].lower()
        self.user_key = policy["user_header"].lower()

    def decider(
        self, percent: int | float, *, targeted: bool, seed: int | None
    ) -> Callable[..., Decision]:
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
        threshold = percent_threshold(percent)
        everyone = threshold == _BUCKETS
        crc32 = zlib.crc32

        def decide(
            headers: Mapping[str, str],
            ip: str | None = None,
            city: str | None = None,
            user: str | None = None,
        ) -> Decision:
            # `in` and a subscript rather than .get() (a method call): most requests lack
            # the header.
            if (
                header_key is not None
                and header_key in headers
                and headers[header_key] == header_value
            ):
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
                        try:  # utf8(), inline: a call per request costs as much as the encoding
                            encoded = user.encode()
                        except UnicodeEncodeError:
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


# -- several lanes ----------------------------------------------------------------------------

# The rule kinds in the order a lane's rules are tried, as Decision.matched names them.
_KINDS = ("header", "ip", "city", "user", "percent")
# A header name no request has (HTTP has no empty one; any mapping of text can be asked).
_NO_KEY = ""


def _masked_bounds(ranges: list[tuple[int, int, int]]) -> tuple[list[int], list[int]]:
    """Disjoint segments of (first, last, lane bit) ranges that may overlap: `bounds` sorted,
    and masks[bisect_right(bounds, address)] the lanes whose ranges cover an address."""
    if len({bit for _, _, bit in ranges}) == 1:
        # One lane's (the gray lane's alone, most often): disjoint and sorted already.
        bit = ranges[0][2]
        return _bounds([(first, last) for first, last, _ in ranges]), [0, *[bit, 0] * len(ranges)]
    points = sorted({first for first, _, _ in ranges} | {last + 1 for _, last, _ in ranges})
    if not points:
        return [], [0]
    # Each lane's own ranges are disjoint (ip_ranges), so a lane covers a point between its
    # first and its stop: add at a first, remove at a stop.
    adds: dict[int, int] = {}
    removes: dict[int, int] = {}
    for first, last, bit in ranges:
        adds[first] = adds.get(first, 0) | bit
        removes[last + 1] = removes.get(last + 1, 0) | bit
    bounds: list[int] = []
    masks = [0]
    mask = 0
    for point in points:
        mask = (mask & ~removes.get(point, 0)) | adds.get(point, 0)
        if mask != masks[-1]:
            bounds.append(point)
            masks.append(mask)
    return bounds, masks


def _masked_v4_blocks(
    bounds: list[int], masks: list[int]
) -> list[tuple[list[int], list[int]] | None]:
    """_masked_bounds per IPv4 /16 block, as offsets within the block (see _v4_blocks)."""
    blocks: list[tuple[list[int], list[int]] | None] = [None] * 0x10000
    # The last bound closes the last range: nothing is covered after it.
    for start, stop, mask in zip(bounds, bounds[1:], masks[1:], strict=False):
        if not mask:
            continue
        first_block, last_block = start >> 16, (stop - 1) >> 16
        edges: Iterable[int] = range(first_block, last_block + 1)
        if last_block - first_block > 1:
            # Blocks wholly inside one segment share one entry (a /1 covers 32,768 blocks);
            # no later segment touches them, so it is never changed.
            whole = ([0, 0x10000], [0, mask, 0])
            blocks[first_block + 1 : last_block] = [whole] * (last_block - first_block - 1)
            edges = (first_block, last_block)
        for block in edges:
            base = block << 16
            entry = blocks[block]
            if entry is None:
                entry = blocks[block] = ([], [0])
            offsets, block_masks = entry
            # Not max() and min(): a call each per segment was a tenth of a compile.
            low = start - base if start > base else 0
            high = stop - base if stop < base + 0x10000 else 0x10000
            if offsets and offsets[-1] == low:
                block_masks[-1] = mask  # a segment right after the last: no gap between
            else:
                offsets.append(low)
                block_masks.append(mask)
            offsets.append(high)
            block_masks.append(0)
    return blocks


class _LaneIndex:
    """Every enabled lane's rules, one index per rule kind, each entry a mask of lane bits
    (bit i: the i-th lane in the order they are tried)."""

    def __init__(
        self,
        policy: Mapping[str, Any],
        lanes: Mapping[str, Mapping[str, Any]],
        gray_priority: int,
    ):
        self.order = lane_order(lanes, gray_priority)
        # The city and user headers are the policy's, for every lane.
        self.city_key = policy["city_header"].lower()
        self.user_key = policy["user_header"].lower()
        self.bits = {name: 1 << index for index, name in enumerate(self.order)}
        matches = {
            name: (policy if name == GRAY_LANE else lanes[name]["match"]) for name in self.order
        }
        headers: dict[str, dict[str, int]] = {}
        v4: list[tuple[int, int, int]] = []
        v6: list[tuple[int, int, int]] = []
        self.cities: dict[str, int] = {}
        self.users: dict[str, int] = {}
        # Lane-wide percents: (bit, buckets taken, the lane's rank of a bucket).
        self.percents: list[tuple[int, int, tuple[int, ...]]] = []
        for name, match in matches.items():
            bit = self.bits[name]
            header = match["header"]
            if header["name"]:
                values = headers.setdefault(header["name"].lower(), {})
                values[header["value"]] = values.get(header["value"], 0) | bit
            lane_v4, lane_v6 = ip_ranges(match["ips"])
            v4 += [(first, last, bit) for first, last in lane_v4]
            v6 += [(first, last, bit) for first, last in lane_v6]
            for city in match["cities"]:
                for key in city_keys(city):
                    self.cities[key] = self.cities.get(key, 0) | bit
            # A lane's users at once (100,000 in a step per user would be most of a compile).
            lane_users = dict.fromkeys(match["users"], bit)
            for user in lane_users.keys() & self.users.keys():
                lane_users[user] |= self.users[user]
            self.users.update(lane_users)
            threshold = percent_threshold(match["percent"])
            if threshold:
                self.percents.append((bit, threshold, lane_rank(name)))
        self.headers = tuple(headers.items())
        # The users of `users` as a set: most requests' user is in no lane, and a set tells
        # that from one cache line where a dict reads two (its index, then its entry).
        self.user_set = frozenset(self.users)
        self.has_ips = bool(v4 or v6)
        self.v4_blocks = _masked_v4_blocks(*_masked_bounds(v4))
        self.v6_bounds, self.v6_masks = _masked_bounds(v6)
        self.decisions = [
            {kind: Decision(GRAY, kind, name) for kind in _KINDS} for name in self.order
        ]

    def percent_table(self, percents: list[tuple[int, int, tuple[int, ...]]]) -> list[int]:
        """mask[bucket] of the lanes whose percent takes the bucket."""
        table = [0] * _BUCKETS
        for bit, threshold, rank in percents:
            for bucket in range(_BUCKETS):
                if rank[bucket] < threshold:
                    table[bucket] |= bit
        return table


def _compile_lanes(
    policy: Mapping[str, Any],
    services: Mapping[str, Mapping[str, Any]],
    lanes: Mapping[str, Mapping[str, Any]],
    gray_priority: int,
) -> tuple[Callable[..., Decision], dict[str, Callable[..., Decision]]]:
    index = _LaneIndex(policy, lanes, gray_priority)
    every = (1 << len(index.order)) - 1
    table: Sequence[int] | None = None
    if index.percents:
        table = index.percent_table(index.percents)
        if len(index.order) <= 64:
            # One contiguous block rather than pointers to int objects all over the heap: a
            # request's bucket costs one cache line, not two (LL misses in bench/engine.py).
            table = array("Q", table)
    everyone = sum(bit for bit, threshold, _ in index.percents if threshold == _BUCKETS)
    default = _lanes_decider(index, table, everyone, every, every, ())
    own = {
        service: _lanes_decider(index, table, everyone, *masks, service)
        for service, masks in service_lane_masks(index, services, lanes).items()
    }
    return default, own


def service_lane_masks(
    index: _LaneIndex,
    services: Mapping[str, Mapping[str, Any]],
    lanes: Mapping[str, Mapping[str, Any]],
) -> dict[str, tuple[int, int, tuple[tuple[int, int, tuple[int, ...]], ...]]]:
    """Per service whose requests are decided other than the default: (the lanes whose rules
    apply to requests entering there, the lanes whose lane-wide percent does, the members' own
    percents as (bit, buckets taken, rank)). A member with `targeted` false leaves its lane's
    match out; routing_engine.portable exports the same for the Lua decider."""
    every = (1 << len(index.order)) - 1
    members: dict[str, list[tuple[str, Mapping[str, Any]]]] = {}
    for name, override in services.items():
        members.setdefault(name, []).append((GRAY_LANE, override))
    for lane_name, lane in lanes.items():
        for service, member in lane["members"].items():
            members.setdefault(service, []).append((lane_name, member))
    result = {}
    for service, entries in members.items():
        rules_mask = percent_mask = every
        own_percents: list[tuple[int, int, tuple[int, ...]]] = []
        for lane_name, member in entries:
            bit = index.bits[lane_name]
            if lane_name == GRAY_LANE:
                # The gray lane as before lanes: `targeted` false leaves out the header, IP,
                # city and user rules; a service's own percent replaces the policy's.
                percent, targeted = service_routing(member)
                if not targeted:
                    rules_mask &= ~bit
                if percent is not None:
                    percent_mask &= ~bit
                    threshold = percent_threshold(percent)
                    if threshold:
                        own_percents.append((bit, threshold, lane_rank(GRAY_LANE)))
                continue
            if not member["targeted"]:
                rules_mask &= ~bit
                percent_mask &= ~bit
            if percent_threshold(member["percent"]):
                own_percents.append(
                    (bit, percent_threshold(member["percent"]), lane_rank(lane_name))
                )
        if rules_mask == every and percent_mask == every and not own_percents:
            continue
        result[service] = (rules_mask, percent_mask, tuple(own_percents))
    return result


def _lanes_decider(
    index: _LaneIndex,
    table: Sequence[int] | None,
    everyone: int,
    rules_mask: int,
    percent_mask: int,
    own_percents: tuple[tuple[int, int, tuple[int, ...]], ...],
    service: str | None = None,
) -> Callable[..., Decision]:
    """decide() of requests entering at `service` (None: a service with no member rules)."""
    # The first two header rules by name (most documents have at most two: gray's and the
    # lanes'), tested without a loop; a name no request has, with no values, stands for a
    # missing one.
    (key1, values1), (key2, values2) = [*index.headers, (_NO_KEY, {}), (_NO_KEY, {})][:2]
    more_headers = index.headers[2:]
    has_ips = index.has_ips
    v4_blocks = index.v4_blocks
    v6_bounds, v6_masks = index.v6_bounds, index.v6_masks
    cities = index.cities
    users = index.users
    user_set = index.user_set
    decisions = index.decisions
    city_key = index.city_key
    user_key = index.user_key
    seed = service_seed(service) if service is not None else 0
    own_everyone = sum(bit for bit, threshold, _ in own_percents if threshold == _BUCKETS)
    hashed = table is not None or bool(own_percents)
    crc32 = zlib.crc32

    def resolve(
        header_mask: int,
        ip_mask: int,
        city_mask: int,
        user_mask: int,
        percent_hit: int,
        own_hit: int,
    ) -> Decision:
        """The decision of a request some lane's rule or percent matched, by its masks."""
        ruled = (header_mask | ip_mask | city_mask | user_mask) & rules_mask
        mask = ruled | (percent_hit & percent_mask) | own_hit
        if not mask:
            return _PROD
        lowest = mask & -mask
        chosen = decisions[lowest.bit_length() - 1]
        if ruled & lowest:
            if header_mask & lowest:
                return chosen["header"]
            if ip_mask & lowest:
                return chosen["ip"]
            if city_mask & lowest:
                return chosen["city"]
            return chosen["user"]
        return chosen["percent"]

    if speedups is not None and len(index.order) <= 64:
        # The masks below in C (uint64: up to 64 lanes), then resolve() as here.
        return speedups.Probe(
            index.headers, has_ips, v4_blocks, v6_bounds, v6_masks, cities, users, user_set,
            city_key, user_key, seed, everyone, own_everyone, table, own_percents, _PROD, resolve,
        )  # fmt: skip

    def decide(
        headers: Mapping[str, str],
        ip: str | None = None,
        city: str | None = None,
        user: str | None = None,
    ) -> Decision:
        # Membership first (`in`, no call), the lane mask only on a hit: most requests match
        # nothing, and a method call per lookup would cost more than the lookup itself.
        header_mask = 0
        if key1 in headers:
            value = headers[key1]
            if value in values1:
                header_mask = values1[value]
        if key2 in headers:
            value = headers[key2]
            if value in values2:
                header_mask |= values2[value]
        for key, values in more_headers:
            if key in headers:
                value = headers[key]
                if value in values:
                    header_mask |= values[value]
        ip_mask = 0
        if has_ips and ip is not None:
            try:
                if ":" not in ip:
                    packed: bytes | None = inet_pton(AF_INET, ip)
                else:
                    packed = inet_pton(AF_INET6, ip)
                    if packed[:12] != _V4_MAPPED:
                        ip_mask = v6_masks[bisect_right(v6_bounds, int.from_bytes(packed))]
                        packed = None
            except (OSError, TypeError, ValueError):
                packed = None  # not an address: it matches no rule
            if packed is not None:
                block = v4_blocks[packed[-4] << 8 | packed[-3]]
                if block is not None:
                    ip_mask = block[1][bisect_right(block[0], packed[-2] << 8 | packed[-1])]
        city_mask = 0
        if cities:
            if city is None:
                city = headers.get(city_key)
            if city is not None:
                city = city.strip().casefold()
                if city in cities:
                    city_mask = cities[city]
        user_mask = 0
        percent_hit = everyone
        own_hit = own_everyone
        if user is None:
            user = headers.get(user_key)
        if user:
            if user in user_set:
                user_mask = users[user]
            if hashed:
                try:  # utf8(), inline: a call per request costs as much as the encoding
                    encoded = user.encode()
                except UnicodeEncodeError:
                    encoded = user.encode("utf-8", "surrogatepass")
                if table is not None:
                    percent_hit |= table[crc32(encoded) % _BUCKETS]
                if own_percents:
                    bucket = crc32(encoded, seed) % _BUCKETS
                    for bit, threshold, rank in own_percents:
                        if rank[bucket] < threshold:
                            own_hit |= bit
        if not (header_mask or ip_mask or city_mask or user_mask or percent_hit or own_hit):
            # Most requests: no lane at all, told by truth tests rather than mask arithmetic
            # (each | and & an int operation, and a new int above 256).
            return _PROD
        return resolve(header_mask, ip_mask, city_mask, user_mask, percent_hit, own_hit)

    return decide
