"""The compiled form of one generation that every engine is rendered from.

A gateway document (docs/gateway-protocol.md) is checked by the Python gateway's own
compiler (dataplane.gateway.routing: one set of rules for what a gateway refuses) and then
reduced to what a proxy configuration needs: the decision's rules as plain data, one pool
of endpoints per (service, version) plus one per service with every version (the `ALL`
flag), and per service the pool each flag goes to, prod fallback already applied. The
engines' renderers (render_envoy, render_nginx) are pure functions of this and of the
agent's Site.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from dataplane.gateway.routing import ConfigError, RoutingTable
from routing_engine import ALL, GRAY, PROD, PolicyError, normalize_policy, service_routing
from routing_engine.matcher import _ip_ranges

FLAGS = (PROD, GRAY, ALL)


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
    percent: int  # sticky share of users in gray for this service
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


def compile_document(body: bytes, prod_fallback: bool = True) -> Generation:
    """The Generation of a gateway document; ConfigError says why it is refused."""
    table = RoutingTable.from_document(body, None, prod_fallback)
    document = json.loads(body)
    gray = document["gray"]
    try:
        versions = document.get("versions", {"prod": "V1", "gray": "V2"})  # as RoutingTable
        policy = normalize_policy({**gray, "versions": versions})
    except PolicyError as exc:  # RoutingTable accepted it with the same defaults
        raise ConfigError(f"gray: {exc}") from exc
    v4, v6 = _ip_ranges(policy["ips"])
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
        for instance in service.instances:
            by_version.setdefault(instance.version, []).append(
                Endpoint(instance.host, instance.port, max(1, round(instance.weight * 100)))
            )
        every = tuple(e for version in sorted(by_version) for e in by_version[version])
        own = [Pool(name, name, None, every)] if every else []
        own += [Pool(f"{name}.{v}", name, v, tuple(by_version[v])) for v in sorted(by_version)]
        pools += own
        flags: dict[str, str | None] = {}
        for flag in FLAGS:
            version, chosen = service.by_flag[flag]
            if not chosen:
                flags[flag] = None
            else:
                flags[flag] = name if version is None else f"{name}.{version}"
        percent, salted, targeted = _service_routing(name, document["services"][name], policy)
        routes.append(ServiceRoute(name, flags, percent, salted, targeted))
    return Generation(
        generation=table.generation,
        revision=table.revision,
        checksum=table.checksum,
        rules=rules,
        routes=tuple(routes),
        pools=tuple(pools),
    )


def _service_routing(name: str, raw: dict, policy: dict) -> tuple[int, bool, bool]:
    """(percent, salted, targeted) of a service: its own `percent` (hashed with its name)
    and `targeted` when its override carries them, as routing_engine's GrayMatcher does."""
    percent = raw.get("percent")
    targeted = raw.get("targeted")
    if percent is not None and (
        not isinstance(percent, int) or isinstance(percent, bool) or not 0 <= percent <= 100
    ):
        raise ConfigError(f"services.{name}.percent: not a whole number from 0 to 100")
    if targeted is not None and not isinstance(targeted, bool):
        raise ConfigError(f"services.{name}.targeted: not true or false")
    own, targeted = service_routing(raw)
    if own is None:
        return int(policy["percent"]), False, targeted
    return own, True, targeted
