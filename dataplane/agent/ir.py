"""The compiled form of one generation that every engine is rendered from.

A gateway document (docs/gateway-protocol.md) is checked by the Python gateway's own
compiler (dataplane.gateway.routing, with routing_engine.records: one set of rules for what
a gateway refuses or skips) and then reduced to what a proxy configuration needs: the
decision's rules as plain data, one pool of endpoints per (service, version) plus one per
service with every version (the `ALL` flag: also its instances without a version), and per
service the pool each flag goes to, prod fallback already applied. The
engines' renderers (render_envoy, render_nginx) are pure functions of this and of the
agent's Site.

Lanes other than gray are not rendered yet: each is left out and listed in `skipped` (the
ack), and the engines decide as if it did not exist. A quarantined version's instances are
in no pool (the dashboard lists none; one listed all the same is left out).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dataplane.gateway.routing import RoutingTable, route_key
from routing_engine import ALL, GRAY, PROD, service_routing
from routing_engine.matcher import ip_ranges
from routing_engine.records import Skipped

FLAGS = (PROD, GRAY, ALL)
# Why a lane other than gray is in the ack's `skipped`, for the people who read it.
LANE_NOT_RENDERED = (
    "Envoy and nginx (through the agent) carry the gray lane only for now; its requests are "
    "decided as if this lane did not exist"
)


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
    pools: dict[str, str | None]  # flag -> pool name; None: nothing routable (503)
    percent: int | float  # sticky share of users in gray for this service (0.01 % steps)
    salted: bool  # the percent is hashed with the service name (its own release)
    targeted: bool  # the header, IP, city and user rules apply to this service


@dataclass(frozen=True)
class Rules:
    enabled: bool
    header_name: str  # lower-case; "" means no header rule
    header_value: str
    v4: tuple[tuple[int, int], ...]  # disjoint sorted (first, last) address ranges
    v6: tuple[tuple[int, int], ...]
    cities: tuple[str, ...]  # stripped and casefolded
    users: tuple[str, ...]
    user_header: str  # lower-case
    city_header: str  # lower-case


@dataclass(frozen=True)
class Generation:
    generation: int
    revision: int
    checksum: str
    rules: Rules
    routes: tuple[ServiceRoute, ...]
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

    def asked_version(self, service: str, flag: str) -> str | None:
        for route in self.routes:
            if route.service == service:
                name = route.pools.get(flag)
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
    v4, v6 = ip_ranges(policy["ips"])
    rules = Rules(
        enabled=bool(policy["enabled"]),
        header_name=policy["header"]["name"].lower(),
        header_value=policy["header"]["value"],
        v4=tuple(v4),
        v6=tuple(v6),
        cities=tuple(sorted({city.strip().casefold() for city in policy["cities"]})),
        users=tuple(sorted(set(policy["users"]))),
        user_header=policy["user_header"].lower(),
        city_header=policy["city_header"].lower(),
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
        flags: dict[str, str | None] = {}
        for flag in FLAGS:
            version, chosen = service.by_route[route_key(flag)]
            if not chosen:
                flags[flag] = None
            else:
                flags[flag] = name if version is None else f"{name}.{version}"
        percent, salted, targeted = _service_routing(service.routing, policy)
        routes.append(ServiceRoute(name, flags, percent, salted, targeted))
    lanes_left_out = tuple(Skipped(f"lanes[{name}]", LANE_NOT_RENDERED) for name in table.lanes)
    return Generation(
        generation=table.generation,
        revision=table.revision,
        checksum=table.checksum,
        rules=rules,
        routes=tuple(routes),
        pools=tuple(pools),
        skipped=table.skipped + lanes_left_out,
        table=table,
    )


def _service_routing(override: dict, policy: dict) -> tuple[int | float, bool, bool]:
    """(percent, salted, targeted) of a service: its own `percent` (hashed with its name)
    and `targeted` when its override carries them, as routing_engine's GrayMatcher does."""
    own, targeted = service_routing(override)
    if own is None:
        return policy["percent"], False, targeted
    return own, True, targeted
