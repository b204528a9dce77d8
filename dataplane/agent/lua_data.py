"""The Lua of one generation, for Envoy's Lua filter and nginx's lua-nginx-module alike: the
generation's data as Lua locals, then decide.lua (one decider for both engines).

Large sets are rendered as strings that decide.lua indexes once per worker (Envoy) or in
nginx's master: 100,000 users are two strings, not 100,000 string objects for LuaJIT's
garbage collector.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache
from importlib import resources

from dataplane.agent.ir import Generation
from dataplane.agent.site import Ranges, Site, local_ranges, trusted_ranges
from dataplane.gateway.limits import LINE_TOO_LONG, REQUEST_LINE_LIMIT
from routing_engine import GRAY_STATUS_HEADER, service_seed
from routing_engine.hops import LANE_HEADER, VERSIONS_HEADER
from routing_engine.portable import casefold_table, python_space

POOL_HEADER = "x-graylane-pool"
GEO_HEADER = "x-graylane-geoip-city"
# Envoy: the client's address, for its geoip filter (set by the first Lua filter).
CLIENT_HEADER = "x-graylane-client-ip"
ENGINES = ("envoy", "nginx")
# The headers a route sets (a client's are dropped): X-Gray-Status, X-Gray-Lane and
# X-Gray-Versions.
ROUTE_HEADERS = tuple(name.lower() for name in (GRAY_STATUS_HEADER, LANE_HEADER, VERSIONS_HEADER))


def lua_string(text: str) -> str:
    """A Lua string literal of `text`'s UTF-8 bytes: printable ASCII as is, the rest as
    decimal escapes (no byte of the text can end the literal or start an escape)."""
    out = []
    for byte in text.encode("utf-8", "surrogatepass"):
        if 0x20 <= byte < 0x7F and byte not in (0x22, 0x5C):
            out.append(chr(byte))
        else:
            out.append(f"\\{byte:03d}")
    return '"' + "".join(out) + '"'


def _lua_ranges(ranges: Ranges) -> str:
    v4, v6 = ranges
    text4 = lua_string("".join(f"{first:x}-{last:x}," for first, last in v4))
    text6 = lua_string("".join(f"{first:032x}-{last:032x}," for first, last in v6))
    return f"{{v4 = {text4}, v6 = {text6}}}"


def _joined(items: Iterable[object]) -> str:
    return lua_string("".join(f"{item}," for item in items))


class _Sets:
    """Lane sets by id (1-based, as decide.lua's SETS): each distinct set once."""

    def __init__(self) -> None:
        self.ids: dict[tuple[int, ...], int] = {}

    def id(self, places: list[int]) -> int:
        return self.ids.setdefault(tuple(places), len(self.ids) + 1)

    def render(self) -> str:
        return "{" + "".join(_joined(places) + ", " for places in self.ids) + "}"


def _lookup(places: list[int]) -> str:
    return "{" + "".join(f"[{place}] = true, " for place in places) + "}"


@cache
def _fold_tables() -> tuple[str, str]:
    """FOLD and SPACE: the characters beyond ASCII that str.casefold() changes and that
    str.strip() removes."""
    fold = "".join(
        f"[{lua_string(char)}] = {lua_string(folded)}, "
        for char, folded in casefold_table().items()
        if ord(char) >= 0x80
    )
    space = "".join(
        f"[{lua_string(char)}] = true, " for char in python_space() if ord(char) >= 0x80
    )
    return "{" + fold + "}", "{" + space + "}"


def _rules(generation: Generation) -> list[str]:
    rules = generation.rules
    if not rules["enabled"]:
        rules = {
            "order": [],
            "user_header": "",
            "city_header": "",
            "headers": [],
            "v4": [[], [[]]],
            "v6": [[], [[]]],
            "cities": {},
            "users": {},
            "percents": [],
            "services": {},
            "ranks": {},
        }
    sets = _Sets()
    order = rules["order"]
    place = {name: index for index, name in enumerate(order)}
    headers = "".join(
        f"{{{lua_string(name)}, {{"
        + "".join(f"[{lua_string(value)}] = {sets.id(lanes)}, " for value, lanes in values)
        + "}}, "
        for name, values in rules["headers"]
    )
    v4_bounds, v4_sets = rules["v4"]
    v6_bounds, v6_sets = rules["v6"]
    ips = (
        f"{{v4 = {_joined(f'{bound:x}' for bound in v4_bounds)}, "
        f"v4sets = {_joined(sets.id(lanes) for lanes in v4_sets)}, "
        f"v6 = {_joined(f'{bound:032x}' for bound in v6_bounds)}, "
        f"v6sets = {_joined(sets.id(lanes) for lanes in v6_sets)}}}"
    )
    cities = "".join(
        f"[{lua_string(city)}] = {sets.id(lanes)}, " for city, lanes in rules["cities"].items()
    )
    users = list(rules["users"].items())
    services = []
    for service, own in rules["services"].items():
        mine = "".join(f"{{{entry[0]}, {entry[1]}}}, " for entry in own["own"])
        services.append(
            f"  [{lua_string(service)}] = {{rules = {_lookup(own['rules'])}, "
            f"percents = {_lookup(own['percents'])}, own = {{{mine}}}, "
            f"seed = {service_seed(service)}}},"
        )
    ranks = "".join(f"[{place[name]}] = {_joined(rank)}, " for name, rank in rules["ranks"].items())
    fold, space = _fold_tables() if rules["cities"] else ("{}", "{}")
    return [
        f"local ENABLED = {'true' if generation.rules['enabled'] else 'false'}",
        f"local LANE_COUNT = {len(order)}",
        "local ORDER = {"
        + "".join(f"[{i}] = {lua_string(n)}, " for i, n in enumerate(order))
        + "}",
        f"local USER_KEY = {lua_string(rules['user_header'])}",
        f"local CITY_KEY = {lua_string(rules['city_header'])}",
        f"local HEADER_RULES = {{{headers}}}",
        f"local IPS = {ips}",
        f"local CITIES = {{{cities}}}",
        # The users as strings: one after another, their lengths in bytes, their lane sets.
        f"local USER_TEXT = {lua_string(''.join(user for user, _ in users))}",
        "local USER_LENGTHS = "
        + _joined(len(user.encode("utf-8", "surrogatepass")) for user, _ in users),
        f"local USER_SETS = {_joined(sets.id(lanes) for _, lanes in users)}",
        "local PERCENTS = {"
        + "".join(f"{{{entry[0]}, {entry[1]}}}, " for entry in rules["percents"])
        + "}",
        f"local RANK_TEXT = {{{ranks}}}",
        "local SERVICE_RULES = {",
        *services,
        "}",
        f"local SET_TEXT = {sets.render()}",
        f"local FOLD = {fold}",
        f"local SPACE = {space}",
    ]


def _routes(generation: Generation) -> list[str]:
    lines = ["local ROUTES = {"]
    for route in generation.route_headers:
        headers = "".join(
            f"{{{lua_string(name)}, {lua_string(value)}}}, " for name, value in route.headers
        )
        lane = lua_string(route.lane) if route.lane is not None else "nil"
        lines.append(
            f"  [{lua_string(route.key)}] = {{status = {lua_string(route.flag)}, lane = {lane}, "
            f"headers = {{{headers}}}, baggage = {lua_string(route.baggage)}}},"
        )
    lines.append("}")
    lines.append("local ROUTE_HEADERS = {" + ", ".join(map(lua_string, ROUTE_HEADERS)) + "}")
    lines.append("local SERVICES = {")
    for service in generation.routes:
        pools = "".join(
            f"[{lua_string(key)}] = {lua_string(pool)}, "
            for key, pool in service.pools.items()
            if pool
        )
        lines.append(f"  [{lua_string(service.service)}] = {{{pools}}},")
    lines.append("}")
    return lines


@cache
def _library() -> str:
    return resources.files("dataplane.agent").joinpath("decide.lua").read_text()


def lua_source(generation: Generation, site: Site, engine: str, stage: str = "decide") -> str:
    """The Lua of `generation` for `engine`; with Envoy's --geoip, `stage` "caller" is its
    first filter, which names the client for the geoip filter (decide.lua)."""
    return lua_data(generation, site, engine, stage) + _library()


def lua_data(generation: Generation, site: Site, engine: str, stage: str = "decide") -> str:
    """The Lua locals decide.lua runs over."""
    assert engine in ENGINES
    lines = [
        f"-- Graylane generation {generation.generation} (revision {generation.revision})",
        f"local ENGINE = {lua_string(engine)}",
        f"local STAGE = {lua_string(stage)}",
        f"local GEOIP = {'true' if site.geoip else 'false'}",
        f"local POOL_HEADER = {lua_string(POOL_HEADER)}",
        f"local GEO_HEADER = {lua_string(GEO_HEADER)}",
        f"local CLIENT_HEADER = {lua_string(CLIENT_HEADER)}",
        f"local REQUEST_LINE_LIMIT = {REQUEST_LINE_LIMIT}",
        f"local LINE_TOO_LONG = {lua_string(LINE_TOO_LONG)}",
        f"local SAMPLE_RATE = {site.sample_rate!r}",
        f"local TRUSTED = {_lua_ranges(trusted_ranges(site))}",
        f"local LOCAL = {_lua_ranges(local_ranges())}",
    ]
    if stage == "decide":
        lines += _rules(generation) + _routes(generation)
    return "\n".join(lines) + "\n"
