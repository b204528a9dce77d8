"""Which instances a request may reach, given its gray flag (the reference design's
getGrayServers, docs/gray-release-design.md), and a smooth weighted round robin to pick one
of them.

Instances are plain mappings with at least "version"; "state", "weight", "id",
"host" and "port" are used when present.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import Any

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


def select_instances(
    instances: Iterable[Mapping[str, Any]],
    flag: str,
    prod: str,
    gray: str,
    fallback_to_prod: bool = True,
) -> tuple[str | None, list[Mapping[str, Any]]]:
    """(version chosen, routable instances of it) for a request carrying `flag`.

    ALL reaches every routable instance (version None). PROD never reaches a gray
    instance, even when no prod instance is left. GRAY with no routable gray instance
    falls back to prod when `fallback_to_prod`, and then reports the prod version.
    """
    routable = [instance for instance in instances if is_routable(instance)]
    version = choose_version(flag, prod, gray)
    if version is None:
        return None, routable
    chosen = [instance for instance in routable if instance.get("version") == version]
    if not chosen and flag == GRAY and fallback_to_prod:
        return prod, [instance for instance in routable if instance.get("version") == prod]
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
        if len(instances) == 1:
            # The common case of one candidate: its score would go up by its weight and down
            # by the same total, so nothing changes but the answer.
            only = instances[0]
            return only if instance_weight(only) > 0 else None
        current = self._current
        if len(current) > 4 * len(instances) + 64:
            # Forget instances that left long ago instead of growing forever.
            keep = {instance_key(instance) for instance in instances}
            self._current = current = {k: v for k, v in current.items() if k in keep}
        best = None
        best_key: Hashable = None
        best_score = 0.0
        total = 0.0
        for instance in instances:
            weight = instance_weight(instance)
            if weight <= 0:
                continue
            key = instance_key(instance)
            score = current.get(key, 0.0) + weight
            current[key] = score
            total += weight
            if best is None or score > best_score:
                best, best_key, best_score = instance, key, score
        if best is not None:
            current[best_key] = best_score - total
        return best
