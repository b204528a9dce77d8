"""The compiled form of one generation that every engine is rendered from.

A gateway document (docs/gateway-protocol.md) is checked by the Python gateway's own
compiler (dataplane.gateway.routing, with routing_engine.records: one set of rules for what
a gateway refuses or skips) and then reduced to what a proxy configuration needs: the
decision's rules as plain data (routing_engine.portable, from the structures GrayMatcher
decides by), one pool of endpoints per (service, version) plus one per service with every
version (the `ALL` flag: also its instances without a version), per service the pool each
route goes to (a route: a flag, and its lane under GRAY; fallback to prod already applied),
and per route the headers the Python gateway sends on. Shadow traffic is not carried: its
mirror rules are listed as skipped. The engines' renderers
(render_envoy, render_nginx) are pure functions of this and of the agent's Site.

A quarantined version's instances are in no pool (the dashboard lists none; one listed all
the same is left out).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dataplane.gateway.routing import Route, RoutingTable
from routing_engine.portable import decision_rules
from routing_engine.records import Skipped


@dataclass(frozen=True)
class Endpoint:
    host: str
    port: int
    weight: int  # the document's weight x 100: both engines take integer weights


@dataclass(frozen=True)
class Pool:
    name: str  # "<service>.<version>", or "<service>" for every version
    service: str
    version: str | None  # None: every version of the service
    endpoints: tuple[Endpoint, ...]


@dataclass(frozen=True)
class ServiceRoute:
    service: str
    pools: dict[str, str | None]  # route key -> pool name; None: nothing routable (503)


@dataclass(frozen=True)
class RouteHeaders:
    """What a request of one route carries on (dataplane.gateway.routing.Route)."""

    key: str  # ALL, PROD, or under GRAY the lane's name (routing.route_key)
    flag: str
    lane: str | None
    headers: tuple[tuple[str, str], ...]  # x-gray-status, x-gray-lane, x-gray-versions
    baggage: str  # our members of `baggage`, after the client's others


@dataclass(frozen=True)
class Generation:
    generation: int
    revision: int
    checksum: str
    rules: dict[str, Any]  # routing_engine.portable.decision_rules
    routes: tuple[ServiceRoute, ...]
    route_headers: tuple[RouteHeaders, ...]
    pools: tuple[Pool, ...]
    skipped: tuple[Skipped, ...] = ()  # records of the document left out, for the ack
    # The compiled document, for the next one (a service entry it cannot use keeps this one's).
    table: RoutingTable | None = field(default=None, compare=False, repr=False)

    def version_of(self, service: str, address: str) -> str | None:
        """The version of the instance at "host:port" of `service` (for metrics)."""
        for pool in self.pools:
            if pool.service == service and pool.version is not None:
                for endpoint in pool.endpoints:
                    if f"{endpoint.host}:{endpoint.port}" == address:
                        return pool.version
        return None

    def asked_version(self, service: str, key: str) -> str | None:
        """The version a request of route `key` asks for at `service` (for metrics)."""
        for route in self.routes:
            if route.service == service:
                name = route.pools.get(key)
                pool = next((p for p in self.pools if p.name == name), None)
                return pool.version if pool else None
        return None


def compile_document(
    body: bytes, prod_fallback: bool = True, previous: Generation | None = None
) -> Generation:
    """The Generation of a gateway document (`previous`: the one in force); ConfigError
    says why it is refused."""
    table = RoutingTable.from_document(
        body, previous.table if previous is not None else None, prod_fallback
    )
    policy = table.policy
    rules = decision_rules(
        policy,
        {name: service.routing for name, service in table.services.items()},
        table.lanes,
        table.gray_priority,
    )
    pools: list[Pool] = []
    routes: list[ServiceRoute] = []
    for name in sorted(table.services):
        service = table.services[name]
        by_version: dict[str, list[Endpoint]] = {}
        bare: list[Endpoint] = []  # instances without a version: in the ALL pool only
        for instance in service.instances:
            if instance.version in service.quarantined:
                continue
            endpoint = Endpoint(instance.host, instance.port, max(1, round(instance.weight * 100)))
            if instance.version is None:
                bare.append(endpoint)
            else:
                by_version.setdefault(instance.version, []).append(endpoint)
        every = tuple(e for version in sorted(by_version) for e in by_version[version])
        every += tuple(bare)
        own = [Pool(name, name, None, every)] if every else []
        own += [Pool(f"{name}.{v}", name, v, tuple(by_version[v])) for v in sorted(by_version)]
        pools += own
        by_key: dict[str, str | None] = {}
        for key, (version, chosen) in service.by_route.items():
            by_key[key] = None if not chosen else name if version is None else f"{name}.{version}"
        routes.append(ServiceRoute(name, by_key))
    return Generation(
        generation=table.generation,
        revision=table.revision,
        checksum=table.checksum,
        rules=rules,
        routes=tuple(routes),
        route_headers=tuple(_route_headers(key, route) for key, route in table.routes.items()),
        pools=tuple(pools),
        skipped=table.skipped + _mirror_rules(table),
        table=table,
    )


# Envoy's request_mirror_policies and nginx's `mirror` send the copy and drop its answer
# unseen, so the diff shadow traffic exists for cannot be made there.
MIRROR_SKIPPED = (
    "shadow traffic is not mirrored by this engine: its mirror discards the answer, which "
    "shadow traffic compares with prod's (the Python gateway mirrors)"
)


def _mirror_rules(table: RoutingTable) -> tuple[Skipped, ...]:
    """Every mirror rule of the document, as skipped."""
    records = [
        f"services.{name}.mirror"
        for name, service in sorted(table.services.items())
        if "mirror" in service.routing
    ]
    records += [
        f"lanes[{lane}].members.{service}.mirror"
        for lane, entry in sorted(table.lanes.items())
        for service, member in sorted(entry["members"].items())
        if "mirror" in member
    ]
    return tuple(Skipped(record, MIRROR_SKIPPED) for record in records)


def _route_headers(key: str, route: Route) -> RouteHeaders:
    """The Python gateway's header lines of a route, as (name, value): the very bytes it
    sends (Latin-1, as it writes them)."""
    headers = []
    for line in route.lines.decode("latin-1").split("\r\n"):
        if line:
            name, _, value = line.partition(": ")
            headers.append((name, value))
    return RouteHeaders(
        key, route.flag, route.lane, tuple(headers), route.baggage.decode("latin-1")
    )
