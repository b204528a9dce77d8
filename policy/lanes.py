"""Lanes and quarantines in the live document, and how the API shows them.

The live document keeps (each key only when it holds something, so documents of before lanes
are unchanged):

    "lanes": {"feature-x": {"priority", "enabled", "match", "members",
                            "updated_at", "updated_by"}},     # every lane but gray
    "gray_priority": 1000,                                    # when not 1000
    "quarantined": {"user-app": ["V2"]}                       # versions that get no traffic

The gray lane is the policy itself: its match is the `gray` section, its members the
services' effective gray versions with their own percent and targeted (documents.py).
"""

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from django.utils import timezone

from policy.documents import effective_versions, policy_of
from routing_engine import PolicyError
from routing_engine.lanes import (
    GRAY_LANE,
    GRAY_PRIORITY,
    LANE_FIELDS,
    MATCH_FIELDS,
    empty_match,
    lane_name_problem,
    normalize_lane,
)

# The keys of a service's override that are its member entry in the gray lane.
GRAY_MEMBER_KEYS = ("gray", "percent", "targeted", "mirror")
# Who changed a lane last: kept in its entry, never sent to gateways.
STAMPS = ("updated_at", "updated_by")

# Why a lane may not be removed now (or None), asked of each guard before a lane leaves the
# document. Apps above policy register theirs at start-up (releases/apps.py: a lane an
# active release routes in); policy cannot import them.
LANE_REMOVAL_GUARDS: list[Callable[[str], str | None]] = []


class LaneInUse(Exception):
    """A lane that a guard says is in use cannot be removed (409)."""


def check_lanes_removable(names: Iterable[str]) -> None:
    for name in sorted(names):
        for guard in LANE_REMOVAL_GUARDS:
            reason = guard(name)
            if reason:
                raise LaneInUse(reason)


def lanes_of(document: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    return dict(document.get("lanes", {}))


def gray_priority_of(document: Mapping[str, Any]) -> int:
    return int(document.get("gray_priority", GRAY_PRIORITY))


def quarantined_of(document: Mapping[str, Any]) -> dict[str, list[str]]:
    return dict(document.get("quarantined", {}))


def routing_of(lane: Mapping[str, Any]) -> dict[str, Any]:
    """A stored lane without its stamps: what routes."""
    return {key: value for key, value in lane.items() if key not in STAMPS}


def _with_key(document: dict[str, Any], key: str, value: Any, empty: Any) -> dict[str, Any]:
    result = dict(document)
    if value == empty:
        result.pop(key, None)
    else:
        result[key] = value
    return result


def with_lanes(
    document: dict[str, Any], lanes: Mapping[str, dict[str, Any]], gray_priority: int
) -> dict[str, Any]:
    result = _with_key(document, "lanes", dict(sorted(lanes.items())), {})
    return _with_key(result, "gray_priority", gray_priority, GRAY_PRIORITY)


def with_quarantined(document: dict[str, Any], quarantined: Mapping[str, list[str]]) -> dict:
    kept = {service: sorted(set(v)) for service, v in sorted(quarantined.items()) if v}
    return _with_key(document, "quarantined", kept, {})


def stamped(before: Mapping[str, Any] | None, lane: dict[str, Any], actor: str) -> dict[str, Any]:
    """`lane` with its stamps: kept from `before` when nothing that routes changed."""
    if before is not None and routing_of(before) == lane:
        return {**lane, **{key: before[key] for key in STAMPS if key in before}}
    now = timezone.now().isoformat().replace("+00:00", "Z")
    return {**lane, "updated_at": now, "updated_by": actor}


def check_lane_name(name: Any, existing: Iterable[str] | None = None) -> str:
    problem = lane_name_problem(name)
    if problem:
        raise PolicyError({"name": [problem]})
    if name == GRAY_LANE or (existing is not None and name in existing):
        raise PolicyError({"name": [f"A lane named {name!r} exists already."]})
    return str(name)


def lane_payload(name: str, lane: Mapping[str, Any]) -> dict[str, Any]:
    """A lane as the API answers it."""
    return {
        "name": name,
        **{key: lane[key] for key in LANE_FIELDS},
        "builtin": False,
        "updated_at": lane.get("updated_at"),
        "updated_by": lane.get("updated_by", ""),
    }


def gray_members(document: Mapping[str, Any], services: Iterable[str]) -> dict[str, Any]:
    """The gray lane's members: every service's effective gray version, and its percent (its
    own, else the policy's) and targeted."""
    members = {}
    for service in sorted(set(services) | set(document["services"])):
        _, gray = effective_versions(dict(document), service)
        override = document["services"].get(service, {})
        percent = override.get("percent")
        members[service] = {
            "version": gray,
            "percent": document["gray"]["percent"] if percent is None else percent,
            "targeted": override.get("targeted") is not False,
        }
        if "mirror" in override:
            members[service]["mirror"] = override["mirror"]
    return members


def gray_lane_payload(
    document: Mapping[str, Any], services: Iterable[str], updated_at: str, updated_by: str
) -> dict[str, Any]:
    policy = policy_of(dict(document))
    return {
        "name": GRAY_LANE,
        "priority": gray_priority_of(document),
        "enabled": policy["enabled"],
        "match": {key: policy[key] for key in MATCH_FIELDS},
        "members": gray_members(document, services),
        "builtin": True,
        "updated_at": updated_at,
        "updated_by": updated_by,
    }


def new_lane(data: Mapping[str, Any]) -> dict[str, Any]:
    """A lane from a POST body (its name apart)."""
    return normalize_lane({"match": empty_match(), **data})


def checked_new_lane(name: Any, data: Mapping[str, Any], existing: Iterable[str]) -> dict:
    """A new lane named `name` beside the `existing` ones, normalised; PolicyError with the
    name's problems and the lane's at once."""
    errors: dict[str, list[str]] = {}
    try:
        check_lane_name(name, existing)
    except PolicyError as exc:
        errors.update(exc.errors)
    try:
        lane = new_lane(data)
    except PolicyError as exc:
        errors.update(exc.errors)
    if errors:
        raise PolicyError(errors)
    return lane
