"""The routing table: one gateway document (docs/gateway-protocol.md), checked and compiled
for the request path. Built once per generation. A record that cannot be used (an instance, a
service entry: routing_engine.records) is left out and listed in `skipped`, and the rest is
applied; only a document that is unreadable as a whole (not JSON, no generation, an
unreadable gray section...) is refused (ConfigError), and the table in force stays."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from dataplane.gateway.headers import REQUEST_HANDLED
from routing_engine import (
    ALL,
    GRAY,
    PROD,
    Decision,
    GrayMatcher,
    PolicyError,
    SmoothWeightedRoundRobin,
    normalize_policy,
    prepare,
    select_instances,
)
from routing_engine.balancer import Prepared
from routing_engine.records import Instance, ServiceEntry, Skipped, read_services

__all__ = ["ConfigError", "Instance", "RoutingTable", "Service"]


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
    decide: Callable[..., Decision] | None = None
    # Candidates per flag, computed once: (version asked for, instances of it).
    by_flag: dict[str, tuple[str | None, list[Instance]]] = field(default_factory=dict)
    # Per flag, the candidates as the balancer's pick_prepared() takes them.
    prepared: dict[str, Prepared] = field(default_factory=dict)
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
    # Request headers the proxy picks out as they are parsed: those it handles, and the
    # decision's (which also pass on).
    watched_headers: frozenset[bytes] = REQUEST_HANDLED
    # Records of the document left out (or applied in part), for the ack.
    skipped: tuple[Skipped, ...] = ()
    # The policy's rules and default versions, normalised (the agent renders them).
    policy: dict[str, Any] = field(default_factory=dict)

    def candidates(self, service: Service, flag: str) -> tuple[str | None, list[Instance]]:
        return service.by_flag[flag]

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
        old = previous.services if previous is not None else {}
        entries = dict(read.entries)
        skipped = []
        for name, why in read.unusable.items():
            kept = old.get(name)
            if kept is None or previous is None:
                skipped.append(Skipped(why.record, f"{why.reason}; not routed"))
                continue
            entries[name] = ServiceEntry(name, kept.prod, kept.gray, kept.instances, kept.routing)
            routed = f"{why.reason}; routed as in generation {previous.generation}"
            skipped.append(Skipped(why.record, routed))
        skipped += read.skipped
        services = {}
        for name, entry in entries.items():
            service = Service(name, entry.prod, entry.gray, entry.instances, entry.routing)
            if name in old:
                service.balancer = old[name].balancer
            for flag in (ALL, PROD, GRAY):
                # `routing` off is the reference design's gray.load=false: no version filter.
                asked = flag if policy["routing"] else ALL
                version, chosen = select_instances(
                    service.instances, asked, service.prod, service.gray, fallback_to_prod
                )
                service.by_flag[flag] = (version, chosen)  # type: ignore[assignment]
                service.prepared[flag] = prepare(chosen)
            services[name] = service
        matcher = GrayMatcher(policy, {name: s.routing for name, s in services.items()})
        for name, service in services.items():
            service.decide = matcher.for_service(name)
        decision_headers = frozenset(
            name.lower().encode("latin-1")
            for name in (policy["header"]["name"], policy["city_header"], policy["user_header"])
            if name
        )
        return cls(
            generation=generation,
            revision=revision,
            checksum=str(document.get("checksum", "")),
            matcher=matcher,
            city_header=policy["city_header"].lower(),
            decision_headers=decision_headers,
            services=services,
            watched_headers=REQUEST_HANDLED | decision_headers,
            skipped=tuple(skipped),
            policy=policy,
        )


def _integer(document: dict, key: str) -> int:
    value = document.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ConfigError(f"{key}: not a non-negative integer")
    return value
