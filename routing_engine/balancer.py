"""Which instances a request may reach, given its gray flag (the reference design's
getGrayServers, docs/gray-release-design.md), and a smooth weighted round robin to pick one
of them.

Instances are plain mappings with at least "version"; "state", "weight", "id",
"host" and "port" are used when present.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import Any

from .hops import Ask, ask_for
from .matcher import ALL, GRAY, PROD

ROUTABLE_STATE = "UP"


def is_routable(instance: Mapping[str, Any]) -> bool:
    # The gateway document lists only routable instances and carries no state at all.
    state = instance.get("state")
    return state is None or state == ROUTABLE_STATE


def choose_version(flag: str, prod: str, gray: str) -> str | None:
    """The version a flag asks for; None for ALL (no version filtering)."""
    if flag == PROD:
        return prod
    if flag == GRAY:
        return gray
    if flag == ALL:
        return None
    raise ValueError(f"Unknown gray flag {flag!r}; expected {ALL}, {PROD} or {GRAY}.")


def select_asked(
    instances: Iterable[Mapping[str, Any]],
    ask: Ask | None,
    fallback_to_prod: bool = True,
    excluded: frozenset[str] = frozenset(),
) -> tuple[str | None, list[Mapping[str, Any]], bool]:
    """(version chosen, routable instances of it, whether it is the fallback) for a request
    asking `ask` at a service (routing_engine.hops.ask_for; None: any version). Instances of
    an `excluded` (quarantined) version are never chosen."""
    routable = [
        instance
        for instance in instances
        if is_routable(instance) and (not excluded or instance.get("version") not in excluded)
    ]
    if ask is None:
        return None, routable, False
    chosen = [instance for instance in routable if instance.get("version") == ask.version]
    if not chosen and ask.fallback is not None and fallback_to_prod:
        fallback = ask.fallback
        return fallback, [i for i in routable if i.get("version") == fallback], True
    return ask.version, chosen, False


def select_instances(
    instances: Iterable[Mapping[str, Any]],
    flag: str,
    prod: str,
    gray: str,
    fallback_to_prod: bool = True,
) -> tuple[str | None, list[Mapping[str, Any]]]:
    """(version chosen, routable instances of it) for a request carrying `flag` in the gray
    lane.

    ALL reaches every routable instance (version None). PROD never reaches a gray
    instance, even when no prod instance is left. GRAY with no routable gray instance
    falls back to prod when `fallback_to_prod`, and then reports the prod version.
    """
    choose_version(flag, prod, gray)  # an unknown flag is an error, as it always was
    version, chosen, _ = select_asked(instances, ask_for(flag, None, prod, gray), fallback_to_prod)
    return version, chosen


def instance_key(instance: Mapping[str, Any]) -> Hashable:
    """Identity of an instance across refreshes of the instance list."""
    instance_id = instance.get("id")
    if instance_id is not None:
        return instance_id
    return (instance.get("host"), instance.get("port"))


def instance_weight(instance: Mapping[str, Any]) -> float:
    weight = instance.get("weight")
    return 1.0 if weight is None else float(weight)


# (instance, its key, its weight) of each candidate that takes traffic.
Prepared = list[tuple[Mapping[str, Any], Hashable, float]]


def prepare(instances: Iterable[Mapping[str, Any]]) -> Prepared:
    """The candidates as SmoothWeightedRoundRobin.pick_prepared() takes them; weight 0 (or
    less) takes no traffic, as in Nacos."""
    prepared = []
    for instance in instances:
        weight = instance_weight(instance)
        if weight > 0:
            prepared.append((instance, instance_key(instance), weight))
    return prepared


class SmoothWeightedRoundRobin:
    """Nginx's smooth weighted round robin: weights 5,1,1 give a,a,b,a,c,a,a — spread out,
    not a,a,a,a,a,b,c. Weight 0 (or less) takes no traffic, as in Nacos.

    State is kept per instance key, so the instance list may change between calls. One
    object per service is enough: picks among any subset of its instances stay fair.
    """

    __slots__ = ("_current",)

    def __init__(self) -> None:
        self._current: dict[Hashable, float] = {}

    def pick(self, instances: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
        return self.pick_prepared(prepare(instances))

    def pick_prepared(self, prepared: Prepared) -> Mapping[str, Any] | None:
        """pick() over the list prepare() made of the candidates: for a caller that asks
        many times about the same candidates (the gateway: once per configuration), with no
        lookups per instance."""
        if len(prepared) <= 1:
            # The common case of one candidate: its score would go up by its weight and down
            # by the same total, so nothing changes but the answer.
            return prepared[0][0] if prepared else None
        current = self._current
        if len(current) > 4 * len(prepared) + 64:
            # Forget instances that left long ago instead of growing forever.
            keep = {key for _, key, _ in prepared}
            self._current = current = {k: v for k, v in current.items() if k in keep}
        best = None
        best_key: Hashable = None
        best_score = 0.0
        total = 0.0
        for instance, key, weight in prepared:
            score = current.get(key, 0.0) + weight
            current[key] = score
            total += weight
            if best is None or score > best_score:
                best, best_key, best_score = instance, key, score
        if best is not None:
            current[best_key] = best_score - total
        return best
