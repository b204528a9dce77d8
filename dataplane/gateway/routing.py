"""The routing table: one gateway document (docs/gateway-protocol.md), checked and compiled
for the request path. Built once per generation; a document that does not pass is refused
whole (ConfigError) and the table in force stays."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from routing_engine import (
    ALL,
    GRAY,
    PROD,
    SERVICE_ROUTING_FIELDS,
    Decision,
    GrayMatcher,
    PolicyError,
    SmoothWeightedRoundRobin,
    normalize_policy,
    normalize_service_routing,
    select_instances,
)


class ConfigError(ValueError):
    """A gateway document this gateway will not run; the message goes into the error ack."""


@dataclass(frozen=True, slots=True)
class Instance(Mapping):
    id: str
    host: str
    port: int
    version: str
    weight: float

    @property
    def address(self) -> tuple[str, int]:
        return self.host, self.port

    # The engine reads instances as mappings (with no "state": all listed are routable).
    def __getitem__(self, key: str) -> Any:
        try:
            return getattr(self, key)
        except AttributeError:
            raise KeyError(key) from None

    def __iter__(self) -> Iterator[str]:
        return iter(("id", "host", "port", "version", "weight"))

    def __len__(self) -> int:
        return 5

    def get(self, key: str, default: Any = None) -> Any:
        # The balancer calls this for every candidate of every request: no KeyError detour.
        return getattr(self, key, default)


@dataclass(slots=True)
class Service:
    name: str
    prod: str
    gray: str
    instances: list[Instance]
    # The service's own routing override (`percent`, `targeted`), and its decide().
    routing: dict[str, Any] = field(default_factory=dict)
    decide: Callable[..., Decision] | None = None
    # Candidates per flag, computed once: (version asked for, instances of it).
    by_flag: dict[str, tuple[str | None, list[Instance]]] = field(default_factory=dict)
    balancer: SmoothWeightedRoundRobin = field(default_factory=SmoothWeightedRoundRobin)


@dataclass(slots=True)
class RoutingTable:
    generation: int
    revision: int
    checksum: str
    matcher: GrayMatcher
    city_header: str  # lower-case
    # Request headers the decision reads (lower-case): the header rule's, city and user.
    decision_headers: frozenset[bytes]
    services: dict[str, Service]

    def candidates(self, service: Service, flag: str) -> tuple[str | None, list[Instance]]:
        return service.by_flag[flag]

    @classmethod
    def from_document(
        cls, body: bytes, previous: RoutingTable | None = None, fallback_to_prod: bool = True
    ) -> RoutingTable:
        """Compile a document; ConfigError says what is wrong with it. Balancer state of
        services also in `previous` carries over, so a reload does not restart the
        round robin."""
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
        old = previous.services if previous is not None else {}
        services = {}
        for name, raw in raw_services.items():
            service = _service(name, raw)
            if name in old:
                service.balancer = old[name].balancer
            for flag in (ALL, PROD, GRAY):
                # `routing` off is the reference design's gray.load=false: no version filter.
                asked = flag if policy["routing"] else ALL
                version, chosen = select_instances(
                    service.instances, asked, service.prod, service.gray, fallback_to_prod
                )
                service.by_flag[flag] = (version, chosen)  # type: ignore[assignment]
            services[name] = service
        matcher = GrayMatcher(policy, {name: s.routing for name, s in services.items()})
        for name, service in services.items():
            service.decide = matcher.for_service(name)
        return cls(
            generation=generation,
            revision=revision,
            checksum=str(document.get("checksum", "")),
            matcher=matcher,
            city_header=policy["city_header"].lower(),
            decision_headers=frozenset(
                name.lower().encode("latin-1")
                for name in (policy["header"]["name"], policy["city_header"], policy["user_header"])
                if name
            ),
            services=services,
        )


def _integer(document: dict, key: str) -> int:
    value = document.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ConfigError(f"{key}: not a non-negative integer")
    return value


def _version(raw: dict, where: str, key: str) -> str:
    value = raw.get(key)
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{where}.{key}: no version (an empty or missing {key} version)")
    return value


def _service(name: str, raw: Any) -> Service:
    where = f"services.{name}"
    if not name or "/" in name:
        raise ConfigError(f"{where}: not a service name")
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: not an object")
    prod, gray = _version(raw, where, "prod"), _version(raw, where, "gray")
    raw_instances = raw.get("instances", [])
    if not isinstance(raw_instances, list):
        raise ConfigError(f"{where}.instances: not a list")
    instances = []
    for n, item in enumerate(raw_instances):
        at = f"{where}.instances[{n}]"
        if not isinstance(item, dict):
            raise ConfigError(f"{at}: not an object")
        host, port, weight = item.get("host"), item.get("port"), item.get("weight", 1.0)
        if not isinstance(host, str) or not host:
            raise ConfigError(f"{at}.host: not a host")
        if not isinstance(port, int) or isinstance(port, bool) or not 0 < port < 65536:
            raise ConfigError(f"{at}.port: not a TCP port")
        if not isinstance(weight, int | float) or isinstance(weight, bool) or weight < 0:
            raise ConfigError(f"{at}.weight: not a non-negative number")
        instances.append(
            Instance(
                id=str(item.get("id") or f"{host}:{port}"),
                host=host,
                port=port,
                version=_version(item, at, "version"),
                weight=float(weight),
            )
        )
    try:
        routing = normalize_service_routing(
            {key: raw[key] for key in SERVICE_ROUTING_FIELDS if key in raw}
        )
    except PolicyError as exc:
        raise ConfigError(f"{where}: {exc}") from exc
    return Service(name, prod, gray, instances, routing)
