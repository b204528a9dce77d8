"""The gray decision's rules as plain data, for deciders written in other languages (the
agent's Lua, dataplane/agent/decide.lua, in Envoy and nginx).

They are read from the very structures GrayMatcher decides by (matcher._LaneIndex and
matcher.service_lane_masks), so the Python and the other deciders cannot drift: what they
must do with the data is the lanes decider's algorithm (matcher._lanes_decider), which
docs/gateway-protocol.md writes down. Lanes are named by their place in `order` (0: tried
first); a set of lanes is the sorted list of those places.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping
from typing import Any

from .lanes import GRAY_LANE, GRAY_PRIORITY
from .matcher import _KINDS, _LaneIndex, service_lane_masks

__all__ = ["decision_rules", "casefold_table", "python_space"]


def _places(mask: int) -> list[int]:
    return [place for place in range(mask.bit_length()) if mask >> place & 1]


def _flat_v4(index: _LaneIndex) -> tuple[list[int], list[list[int]]]:
    """The IPv4 segments of every /16 block joined again: bounds, and sets[i] the lanes of
    the addresses from bounds[i - 1] to bounds[i] (sets[0] below the first bound)."""
    bounds: list[int] = []
    masks = [0]
    for block, entry in enumerate(index.v4_blocks):
        if entry is None:
            continue
        base = block << 16
        offsets, block_masks = entry
        # block_masks[i + 1] is the mask from offsets[i] on; a block's last one is 0.
        for offset, mask in zip(offsets, block_masks[1:], strict=True):
            if bounds and bounds[-1] == base + offset:
                # A segment starting where the previous block's last one stops.
                bounds.pop()
                masks.pop()
            if mask != masks[-1]:
                bounds.append(base + offset)
                masks.append(mask)
    return bounds, [_places(mask) for mask in masks]


def decision_rules(
    policy: Mapping[str, Any],
    services: Mapping[str, Mapping[str, Any]] | None = None,
    lanes: Mapping[str, Mapping[str, Any]] | None = None,
    gray_priority: int = GRAY_PRIORITY,
) -> dict[str, Any]:
    """The rules GrayMatcher(policy, services, lanes, gray_priority) decides by, as data:

    * `enabled`: false decides ALL, and nothing else is given;
    * `order`: the lanes' names in the order they are tried (the gray lane among them);
    * `user_header`, `city_header` (lower-case);
    * `headers`: [[name (lower-case), [[value, lanes], ...]], ...];
    * `v4`, `v6`: [bounds, sets]: an address `a` is in the lanes sets[bisect_right(bounds, a)];
    * `cities` (stripped and casefolded) and `users`: {text: lanes};
    * `percents`: [[place, buckets taken], ...]: the lanes' own `match.percent`, a user
      taken when ranks[name][crc32(user) % 10000] < buckets (all users, and requests without
      one, at 10,000);
    * `services`: per service decided otherwise, {"rules": lanes whose header, IP, city and
      user rules apply, "percents": lanes whose lane-wide percent applies, "own": [[place,
      buckets], ...] taken by crc32(service NUL user) % 10000};
    * `ranks`: per lane with a percent, rank[bucket] (routing_engine.lanes.lane_rank; the
      gray lane's is the bucket itself and is left out).

    Rules are tried in the order of `kinds`; the first lane (lowest place) any rule takes
    wins, with the first kind that takes it.
    """
    if not policy["enabled"]:
        return {"enabled": False}
    enabled = {name: lane for name, lane in (lanes or {}).items() if lane.get("enabled", True)}
    index = _LaneIndex(policy, enabled, gray_priority)
    ranked: dict[str, tuple[int, ...]] = {}

    def percents(entries: Iterable[tuple[int, int, tuple[int, ...]]]) -> list[list[int]]:
        out = []
        for bit, threshold, rank in entries:
            name = index.order[bit.bit_length() - 1]
            if name != GRAY_LANE:
                ranked[name] = rank
            out.append([bit.bit_length() - 1, threshold])
        return out

    own = {
        service: {"rules": _places(rules), "percents": _places(lane_wide), "own": percents(mine)}
        for service, (rules, lane_wide, mine) in service_lane_masks(
            index, services or {}, enabled
        ).items()
    }
    return {
        "enabled": True,
        "kinds": list(_KINDS),
        "order": list(index.order),
        "user_header": index.user_key,
        "city_header": index.city_key,
        "headers": [
            [name, [[value, _places(mask)] for value, mask in values.items()]]
            for name, values in index.headers
        ],
        "v4": list(_flat_v4(index)),
        "v6": [list(index.v6_bounds), [_places(mask) for mask in index.v6_masks]],
        "cities": {city: _places(mask) for city, mask in index.cities.items()},
        "users": {user: _places(mask) for user, mask in index.users.items()},
        "percents": percents(index.percents),
        "services": own,
        "ranks": {name: list(rank) for name, rank in sorted(ranked.items())},
    }


def python_space() -> list[str]:
    """The characters str.strip() removes: a city is compared stripped of them."""
    return [chr(code) for code in range(sys.maxunicode + 1) if chr(code).isspace()]


def casefold_table() -> dict[str, str]:
    """Every character str.casefold() changes, and what it becomes (a city is compared
    casefolded; casefold works one character at a time)."""
    table = {}
    for code in range(sys.maxunicode + 1):
        if 0xD800 <= code <= 0xDFFF:
            continue
        char = chr(code)
        folded = char.casefold()
        if folded != char:
            table[char] = folded
    return table
