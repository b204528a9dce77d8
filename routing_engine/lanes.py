"""Lanes: named groups of service versions with match rules of their own, deciding beside the
seed's gray policy, which is the built-in lane `gray` (docs/gray-release-design.md, "Lanes").

A lane as the live document keeps it (under its name):

    {"priority": 100, "enabled": true,
     "match": {"header": {"name", "value"}, "ips": [...], "cities": [...], "users": [...],
               "percent": 0},
     "members": {"user-app": {"version": "V3", "percent": 0, "targeted": true}}}

A member may be written as its version alone (`"user-app": "V3"`); it is always stored and
sent in the object form. This module validates and normalises lanes, with the same rules
and messages as the policy (routing_engine.policy), and says which bucket of users a lane's
percent takes (lane_rank).
"""

from __future__ import annotations

import copy
import re
import zlib
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from .policy import (
    _VALIDATORS,
    NON_FIELD_ERRORS,
    PolicyError,
    _boolean,
    _Errors,
    _header,
    _percent,
    _type_name,
    normalize_mirror,
)
from .records import service_name_problem, version_problem

GRAY_LANE = "gray"
# The gray lane's priority unless the policy says otherwise: lanes made for testers and
# features usually come first (lower is tried first).
GRAY_PRIORITY = 1000
MAX_PRIORITY = 1_000_000
LANE_NAME = re.compile(r"[a-z0-9][a-z0-9-]{0,62}\Z")
MATCH_FIELDS = ("header", "ips", "cities", "users", "percent")
LANE_FIELDS = ("priority", "enabled", "match", "members")
MEMBER_FIELDS = ("version", "percent", "targeted", "mirror")
# A member version is compared with instances' versions, which are at most this long.
MAX_MEMBER_VERSION = 64
BUCKETS = 10_000


def empty_match() -> dict[str, Any]:
    return {"header": {"name": "", "value": ""}, "ips": [], "cities": [], "users": [], "percent": 0}


def lane_name_problem(name: Any) -> str | None:
    if isinstance(name, str) and LANE_NAME.match(name):
        return None
    return (
        f"{name!r} is not a lane name: 1-63 lower-case letters, digits and '-', "
        "a letter or digit first."
    )


def _priority(value: Any, field: str, errors: _Errors) -> int | None:
    if type(value) is not int or not 0 <= value <= MAX_PRIORITY:
        errors.add(field, f"Must be a whole number from 0 to {MAX_PRIORITY}, got {value!r}.")
        return None
    return value


def _match(value: Any, field: str, errors: _Errors) -> dict[str, Any] | None:
    """A lane's match: any of the policy's rule fields (missing ones match nothing)."""
    if not isinstance(value, Mapping):
        errors.add(field, f"Must be an object with keys {', '.join(MATCH_FIELDS)}.")
        return None
    result = empty_match()
    for key in value:
        if key not in MATCH_FIELDS:
            errors.add(f"{field}.{key}", "Unknown field.")
    for key in MATCH_FIELDS:
        if key in value:
            validate = _header if key == "header" else _VALIDATORS[key]
            result[key] = validate(value[key], f"{field}.{key}", errors)
    return result


def normalize_member(value: Any, field: str, errors: _Errors) -> dict[str, Any] | None:
    """A member in the object form, from a version string or an object."""
    if isinstance(value, str):
        value = {"version": value}
    if not isinstance(value, Mapping):
        errors.add(field, "Must be a version or an object with version, percent, targeted.")
        return None
    for key in value:
        if key not in MEMBER_FIELDS:
            errors.add(f"{field}.{key}", "Unknown field.")
    version = value.get("version")
    problem = version_problem(version, MAX_MEMBER_VERSION)
    if problem:
        errors.add(f"{field}.version", f"Must be a version: {problem}.")
    percent = _percent(value.get("percent", 0), f"{field}.percent", errors)
    targeted = _boolean(value.get("targeted", True), f"{field}.targeted", errors)
    # Kept only when set, so members (and checksums) of before shadow traffic are unchanged.
    mirror = None
    if value.get("mirror") is not None:
        mirror = normalize_mirror(value["mirror"], f"{field}.mirror", errors)
    if problem or not isinstance(version, str):
        return None
    member: dict[str, Any] = {"version": version.strip(), "percent": percent, "targeted": targeted}
    if mirror is not None:
        member["mirror"] = mirror
    return member


def _members(value: Any, field: str, errors: _Errors) -> dict[str, Any] | None:
    if not isinstance(value, Mapping):
        errors.add(field, "Must be an object: service name -> version or member object.")
        return None
    members = {}
    for service, member in value.items():
        problem = service_name_problem(service)
        if problem:
            errors.add(field, problem + ".")
            continue
        normalised = normalize_member(member, f"{field}.{service}", errors)
        if normalised is not None:
            members[service] = normalised
    return dict(sorted(members.items()))


def normalize_lane(data: Any) -> dict[str, Any]:
    """Validate a lane (the stored fields: priority, enabled, match, members) and return its
    normalised copy; PolicyError with every problem. `priority` is required; `enabled`
    defaults to true, `match` to matching nothing, `members` to none."""
    errors = _Errors()
    if not isinstance(data, Mapping):
        errors.add(NON_FIELD_ERRORS, f"Expected an object, got {_type_name(data)}.")
        raise PolicyError(errors)
    for key in data:
        if key not in LANE_FIELDS:
            errors.add(str(key), "Unknown field.")
    lane: dict[str, Any] = {}
    if "priority" in data:
        lane["priority"] = _priority(data["priority"], "priority", errors)
    else:
        errors.add("priority", "This field is required.")
    lane["enabled"] = _boolean(data.get("enabled", True), "enabled", errors)
    lane["match"] = _match(data.get("match", {}), "match", errors)
    lane["members"] = _members(data.get("members", {}), "members", errors)
    if errors:
        raise PolicyError(errors)
    return lane


def merge_lane_patch(current: Mapping[str, Any], patch: Any) -> dict[str, Any]:
    """PATCH of a lane: top-level fields replaced, `match` merged one level deep (its
    `header` too), `members` merged by service with null removing one. The result still goes
    through normalize_lane."""
    if not isinstance(patch, Mapping):
        raise PolicyError({NON_FIELD_ERRORS: [f"Expected an object, got {_type_name(patch)}."]})
    merged = copy.deepcopy(dict(current))
    for key, value in patch.items():
        value = copy.deepcopy(value)
        base = merged.get(key)
        if key == "match" and isinstance(value, Mapping) and isinstance(base, Mapping):
            header = value.get("header")
            if isinstance(header, Mapping) and isinstance(base.get("header"), Mapping):
                value = {**value, "header": {**base["header"], **header}}
            value = {**base, **value}
        elif key == "members" and isinstance(value, Mapping) and isinstance(base, Mapping):
            members = dict(base)
            for service, member in value.items():
                if member is None:
                    members.pop(service, None)
                else:
                    members[service] = member
            value = members
        merged[key] = value
    return merged


def lane_errors_prefixed(exc: PolicyError, prefix: str) -> PolicyError:
    """A lane's errors named within a larger document (`lanes.<name>.<field>`)."""
    return PolicyError({f"{prefix}.{field}": messages for field, messages in exc.errors.items()})


def lane_order(lanes: Mapping[str, Mapping[str, Any]], gray_priority: int) -> list[str]:
    """Names of the enabled lanes, the gray lane included, in the order they are tried:
    ascending priority, then name."""
    order = [(gray_priority, GRAY_LANE)]
    order += [(lane["priority"], name) for name, lane in lanes.items() if lane.get("enabled", True)]
    return [name for _, name in sorted(order)]


@lru_cache(maxsize=256)
def lane_rank(lane: str) -> tuple[int, ...]:
    """rank[bucket]: where a bucket (0..9999) stands in lane `lane`'s order of buckets.

    A lane at p % takes the buckets whose rank is below round(100 p), so it is sticky (a
    user keeps their bucket) and monotonic (one in at 5 % is in at 6 %). The gray lane's
    order is the buckets' own (rank = bucket: the percent as it always was); every other
    lane's is the buckets sorted by CRC-32 of the lane's name, a NUL and the bucket in
    decimal, so two lanes at 5 % each take other users. docs/gateway-protocol.md has the
    formula for other engines.
    """
    if lane == GRAY_LANE:
        return tuple(range(BUCKETS))
    salt = lane.encode("utf-8") + b"\0"
    crc32 = zlib.crc32
    order = sorted(range(BUCKETS), key=lambda bucket: (crc32(b"%d" % bucket, crc32(salt)), bucket))
    rank = [0] * BUCKETS
    for position, bucket in enumerate(order):
        rank[bucket] = position
    return tuple(rank)


def read_lanes(raw: Any, gray_priority: Any = GRAY_PRIORITY) -> tuple[dict[str, Any], int, list]:
    """The usable lanes of a gateway document's `lanes` (a list of `{"name", "priority",
    "match", "members"}`) and its `gray_priority`, as (lanes by name, gray priority,
    skipped records): a lane that cannot be used is left out and named in `skipped`, the
    others apply (routing_engine.records)."""
    from .records import Skipped, show

    skipped: list[Skipped] = []
    if type(gray_priority) is not int or not 0 <= gray_priority <= MAX_PRIORITY:
        skipped.append(Skipped("gray_priority", f"{show(gray_priority)} is not a priority; "
                               f"{GRAY_PRIORITY} applies"))  # fmt: skip
        gray_priority = GRAY_PRIORITY
    if raw is None:
        return {}, gray_priority, skipped
    if not isinstance(raw, list):
        skipped.append(Skipped("lanes", f"{type(raw).__name__}, not a list; no lane applies"))
        return {}, gray_priority, skipped
    lanes: dict[str, Any] = {}
    for index, entry in enumerate(raw):
        name = entry.get("name") if isinstance(entry, Mapping) else None
        record = f"lanes[{name if lane_name_problem(name) is None else index}]"
        if not isinstance(entry, Mapping):
            skipped.append(Skipped(record, "not an object"))
            continue
        problem = lane_name_problem(name)
        if not isinstance(name, str):
            skipped.append(Skipped(record, problem or "no name"))
            continue
        if problem is None and (name == GRAY_LANE or name in lanes):
            problem = "listed twice (the gray lane is the document's `gray`)"
        if problem:
            skipped.append(Skipped(record, problem))
            continue
        fields = {key: value for key, value in entry.items() if key != "name"}
        try:
            lanes[name] = normalize_lane({**fields, "enabled": True})
        except PolicyError as exc:
            reasons = "; ".join(f"{field}: {' '.join(msgs)}" for field, msgs in exc.errors.items())
            skipped.append(Skipped(record, reasons))
    return lanes, gray_priority, skipped
