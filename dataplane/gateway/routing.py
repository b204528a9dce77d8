"""The routing table: one gateway document (docs/gateway-protocol.md), checked and compiled
for the request path. Built once per generation. A record that cannot be used (an instance, a
service entry, a lane: routing_engine.records, routing_engine.lanes) is left out and listed
in `skipped`, and the rest is applied; only a document that is unreadable as a whole (not
JSON, no generation, an unreadable gray section...) is refused (ConfigError), and the table
in force stays.

A request's **route** is its flag and, under GRAY, its lane (docs/gateway-protocol.md, "Lanes
in the document"). Everything that depends on the route alone is computed here, once per
generation: per service, the candidate instances of each route; per route, the header lines
the gateway sends on with the request (`X-Gray-Status`, `X-Gray-Lane`, `X-Gray-Versions`)
and its `baggage` members. The proxy only decides, looks up and copies.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from dataplane.gateway.headers import REQUEST_HANDLED
from dataplane.gateway.shadow import Mirror
from routing_engine import (
    ALL,
    GRAY,
    GRAY_STATUS_HEADER,
    PROD,
    Decision,
    GrayMatcher,
    PolicyError,
    SmoothWeightedRoundRobin,
    normalize_policy,
    prepare,
)
from routing_engine.balancer import Prepared, select_asked
from routing_engine.hops import (
    ANY_SERVICE,
    BAGGAGE_FLAG_KEY,
    BAGGAGE_LANE_KEY,
    LANE_HEADER,
    VERSIONS_HEADER,
    Ask,
    ask_for,
    render,
)
from routing_engine.lanes import GRAY_LANE, GRAY_PRIORITY, lane_order, read_lanes
from routing_engine.mirror import mirror_threshold
from routing_engine.records import Instance, ServiceEntry, Skipped, read_services

__all__ = ["ConfigError", "Instance", "Route", "RoutingTable", "Service", "route_key"]


def route_key(flag: str, lane: str | None = None) -> str:
    """The key of a route in the table's dicts: under GRAY its lane (the gray lane when none
    is named), else the flag. Lane names are lower case and flags upper case, so the two never
    meet, and the proxy finds it as `decision.lane or decision.flag` (a Decision has a lane
    exactly when it is GRAY)."""
    return (lane or GRAY_LANE) if flag == GRAY else flag


@dataclass(frozen=True, slots=True)
class Route:
    """A flag and lane, and what a request of theirs carries on to the instance."""

    flag: str
    lane: str | None  # GRAY only
    # Header lines, each ending in CRLF: x-gray-status, x-gray-lane, x-gray-versions.
    lines: bytes
    # Our members of `baggage` (the client's other members are kept before them).
    baggage: bytes
    # What the proxy adds, joined once: the baggage line and `lines` of a request without
    # baggage of its own; what follows the client's members in the baggage line of one with.
    head: bytes = field(init=False)
    after_baggage: bytes = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "head", b"baggage: " + self.baggage + b"\r\n" + self.lines)
        object.__setattr__(self, "after_baggage", b"," + self.baggage + b"\r\n" + self.lines)


class ConfigError(ValueError):
    """A gateway document this gateway will not run; the message goes into the error ack."""


@dataclass(slots=True)
class Service:
    name: str
    prod: str
    gray: str
    instances: list[Instance]
    # The service's own routing override (`percent`, `targeted`), and its decide().
    routing: dict[str, Any] = field(default_factory=dict)
    quarantined: frozenset[str] = frozenset()  # versions that take no traffic at all
    decide: Callable[..., Decision] | None = None
    # Candidates per route (route_key), computed once: (version asked for, instances of it).
    by_route: dict[str, tuple[str | None, list[Instance]]] = field(default_factory=dict)
    # Per route, the candidates as the balancer's pick_prepared() takes them.
    prepared: dict[str, Prepared] = field(default_factory=dict)
    balancer: SmoothWeightedRoundRobin = field(default_factory=SmoothWeightedRoundRobin)
    # Where a share of its PROD requests is copied (shadow.py), if anywhere.
    mirror: Mirror | None = None


@dataclass(slots=True)
class RoutingTable:
    generation: int
    revision: int
    checksum: str
    matcher: GrayMatcher
    city_header: str  # lower-case
    user_header: str  # lower-case
    # Request headers the decision reads (lower-case): every lane's header rule's, the city
    # header and the user header.
    decision_headers: frozenset[bytes]
    services: dict[str, Service]
    # Every route of this generation by route_key: ALL, PROD, the gray lane and each lane.
    routes: dict[str, Route]
    # The lanes other than gray that apply (routing_engine.lanes' form, by name).
    lanes: dict[str, Any] = field(default_factory=dict)
    gray_priority: int = GRAY_PRIORITY
    # Request headers the proxy picks out as they are parsed: those it handles, and the
    # decision's (which also pass on).
    watched_headers: frozenset[bytes] = REQUEST_HANDLED
    # Records of the document left out (or applied in part), for the ack.
    skipped: tuple[Skipped, ...] = ()
    # The policy's rules and default versions, normalised (the agent renders them).
    policy: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_document(
        cls, body: bytes, previous: RoutingTable | None = None, fallback_to_prod: bool = True
    ) -> RoutingTable:
        """Compile a document; ConfigError says why it is unreadable as a whole. A service
        entry that cannot be used keeps the entry of `previous` (if it has that service),
        and balancer state of services also in `previous` carries over, so a reload does not
        restart the round robin."""
        try:
            document = json.loads(body)
        except (ValueError, RecursionError) as exc:
            raise ConfigError(f"not JSON: {exc}") from exc
        if not isinstance(document, dict):
            raise ConfigError("the document is not a JSON object")
        generation = _integer(document, "generation")
        revision = _integer(document, "revision")
        gray = document.get("gray")
        versions = document.get("versions", {"prod": "V1", "gray": "V2"})
        if not isinstance(gray, dict):
            raise ConfigError("gray: not an object")
        try:
            policy = normalize_policy({**gray, "versions": versions})
        except PolicyError as exc:
            raise ConfigError(f"gray: {exc}") from exc
        raw_services = document.get("services")
        if not isinstance(raw_services, dict):
            raise ConfigError("services: not an object")
        read = read_services(raw_services)
        lanes, gray_priority, skipped = read_lanes(
            document.get("lanes"), document.get("gray_priority", GRAY_PRIORITY)
        )
        old = previous.services if previous is not None else {}
        entries = dict(read.entries)
        for name, why in read.unusable.items():
            kept = old.get(name)
            if kept is None or previous is None:
                skipped.append(Skipped(why.record, f"{why.reason}; not routed"))
                continue
            entries[name] = ServiceEntry(
                name, kept.prod, kept.gray, kept.instances, kept.routing, kept.quarantined
            )
            routed = f"{why.reason}; routed as in generation {previous.generation}"
            skipped.append(Skipped(why.record, routed))
        skipped += read.skipped
        # Per service, the lanes it is a member of (lane -> its version there); a lane's
        # member need not have an entry (the defaults' versions are its prod and gray).
        members: dict[str, dict[str, str]] = {name: {} for name in entries}
        for lane_name, lane in lanes.items():
            for service, member in lane["members"].items():
                members.setdefault(service, {})[lane_name] = member["version"]
        keys = [route_key(ALL), route_key(PROD), route_key(GRAY), *lanes]
        routes = {key: _route(key, policy, entries, members) for key in keys}
        services = {}
        for name, entry in entries.items():
            service = Service(
                name, entry.prod, entry.gray, entry.instances, entry.routing, entry.quarantined
            )
            if name in old:
                service.balancer = old[name].balancer
            for key, route in routes.items():
                # `routing` off is the reference design's gray.load=false: no version filter.
                ask = (
                    ask_for(route.flag, route.lane, entry.prod, entry.gray, members[name])
                    if policy["routing"]
                    else None
                )
                version, chosen, _ = select_asked(
                    entry.instances, ask, fallback_to_prod, entry.quarantined
                )
                service.by_route[key] = (version, chosen)  # type: ignore[assignment]
                service.prepared[key] = prepare(chosen)
            service.mirror = _mirror(entry, lanes, gray_priority)
            services[name] = service
        matcher = GrayMatcher(
            policy, {name: s.routing for name, s in services.items()}, lanes, gray_priority
        )
        for name, service in services.items():
            service.decide = matcher.for_service(name)
        header_names = [policy["header"]["name"], policy["city_header"], policy["user_header"]]
        header_names += [lane["match"]["header"]["name"] for lane in lanes.values()]
        decision_headers = frozenset(
            name.lower().encode("latin-1") for name in header_names if name
        )
        return cls(
            generation=generation,
            revision=revision,
            checksum=str(document.get("checksum", "")),
            matcher=matcher,
            city_header=policy["city_header"].lower(),
            user_header=policy["user_header"].lower(),
            decision_headers=decision_headers,
            services=services,
            routes=routes,
            lanes=lanes,
            gray_priority=gray_priority,
            watched_headers=REQUEST_HANDLED | decision_headers,
            skipped=tuple(skipped),
            policy=policy,
        )


def _route(
    key: str,
    policy: Mapping[str, Any],
    entries: Mapping[str, ServiceEntry],
    members: Mapping[str, Mapping[str, str]],
) -> Route:
    """The route `key` and what its requests carry on (docs/gateway-protocol.md, "Lanes on the
    wire"): X-Gray-Versions asks, at each later hop, what this table asks here. `members`:
    per service, lane -> its version there."""
    flag = key if key in (ALL, PROD) else GRAY
    lane = None if flag != GRAY else key
    lines = b"%s: %s\r\n" % (GRAY_STATUS_HEADER.lower().encode(), flag.encode())
    baggage = b"%s=%s" % (BAGGAGE_FLAG_KEY.encode(), flag.encode())
    if lane is not None:
        lines += b"%s: %s\r\n" % (LANE_HEADER.lower().encode(), lane.encode())
        baggage += b",%s=%s" % (BAGGAGE_LANE_KEY.encode(), lane.encode())
    asks: dict[str, Ask | None] = {}
    if policy["routing"]:
        versions = policy["versions"]
        anywhere = ask_for(flag, lane, versions["prod"], versions["gray"])
        asks[ANY_SERVICE] = anywhere
        for service in sorted(members):
            entry = entries.get(service)
            prod, gray = (entry.prod, entry.gray) if entry else (versions["prod"], versions["gray"])
            ask = ask_for(flag, lane, prod, gray, members[service])
            if ask != anywhere:  # a service not listed asks what `*` asks
                asks[service] = ask
    # Quarantines go with every request, routing on or off: no hop may reach them.
    quarantined = {
        name: entry.quarantined for name, entry in sorted(entries.items()) if entry.quarantined
    }
    header = render(asks, quarantined)
    if header:
        lines += b"%s: %s\r\n" % (VERSIONS_HEADER.lower().encode(), header.encode("ascii"))
    return Route(flag, lane, lines, baggage)


def _mirror(entry: ServiceEntry, lanes: Mapping[str, Any], gray_priority: int) -> Mirror | None:
    """The service's mirror: of the lanes that mirror it (the gray lane by its override), the
    first tried, with a routable instance of its version; None when none has."""
    version: str | None
    for lane in lane_order(lanes, gray_priority):
        if lane == GRAY_LANE:
            mirror, version = entry.routing.get("mirror"), entry.gray
        else:
            member = lanes[lane]["members"].get(entry.name, {})
            mirror, version = member.get("mirror"), member.get("version")
        if mirror is None or version == entry.prod or version in entry.quarantined:
            continue
        instances = [i for i in entry.instances if i.version == version]
        if instances:
            return Mirror(version, mirror_threshold(mirror), instances)
    return None


def _integer(document: dict, key: str) -> int:
    value = document.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ConfigError(f"{key}: not a non-negative integer")
    return value
