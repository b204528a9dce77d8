"""The changes a progressive release makes to the live document. releases/services.py calls
them (policy sits below releases and cannot import it). Each one is a single publish: one
revision (source `release`) and one audit entry.

A release's current step is its service's member entry in its lane:

- in the gray lane, the service's override: `gray` (the new version), `percent`, `targeted`
  and, when the release mirrors, `mirror`;
- in another lane, the lane's `members[service]`: `{"version", "percent", "targeted"}` (and
  `mirror`).

A step also makes the release's `from_version` the service's prod when it is not already.

What a release found when it started (`Routing`, kept on the release) is what abort, rollback
and the end of a failed release put back, exactly. Rollback also quarantines the new version.
"""

from collections.abc import Callable
from typing import Any, TypedDict

from policy.documents import effective_versions, with_override
from policy.lanes import (
    GRAY_MEMBER_KEYS,
    gray_priority_of,
    lanes_of,
    quarantined_of,
    routing_of,
    stamped,
    with_lanes,
    with_quarantined,
)
from policy.publishing import PublishResult, publish
from routing_engine.lanes import GRAY_LANE


class Routing(TypedDict):
    """A service's routing in one lane, raw: its override's own `prod` (null: it inherits the
    default), and its member entry (gray lane: the override's keys of GRAY_MEMBER_KEYS, an
    object that may be empty; another lane: the member object, or null when not a member)."""

    prod: str | None
    member: dict[str, Any] | None


def routing_in(document: dict[str, Any], service: str, lane: str) -> Routing:
    override = document["services"].get(service, {})
    member: dict[str, Any] | None
    if lane == GRAY_LANE:
        member = {key: override[key] for key in GRAY_MEMBER_KEYS if key in override}
    else:
        found = lanes_of(document)[lane]["members"].get(service)
        member = None if found is None else dict(found)
    return {"prod": override.get("prod"), "member": member}


def route_step(
    service: str,
    lane: str,
    *,
    from_version: str,
    to_version: str,
    percent: int | float,
    actor: str,
    comment: str,
    mirror: dict[str, Any] | None = None,
) -> Routing:
    """Route a step: `to_version` in `lane` for the lane's targeted requests entering at the
    service and `percent` of its users, and `mirror` (shadow traffic) when given;
    `from_version` its prod. Answers the routing found
    before this change (a release keeps the one found by its first step). LookupError when
    the lane does not exist (any more)."""
    found: list[Routing] = []

    def change(document: dict[str, Any]) -> dict[str, Any]:
        if lane != GRAY_LANE and lane not in lanes_of(document):
            raise LookupError(f"No lane named {lane!r}.")
        found.append(routing_in(document, service, lane))
        override = dict(document["services"].get(service, {}))
        if effective_versions(document, service)[0] != from_version:
            override["prod"] = from_version
        shadow = {} if mirror is None else {"mirror": mirror}
        if lane == GRAY_LANE:
            override.pop("mirror", None)
            override.update(gray=to_version, percent=percent, targeted=True, **shadow)
            return with_override(document, service, override)
        member = {"version": to_version, "percent": percent, "targeted": True, **shadow}
        return _with_member(
            with_override(document, service, override), service, lane, member, actor
        )

    _publish(change, service, lane, "service.versions", actor, comment)
    return found[0]


def restore(
    service: str,
    lane: str,
    before: Routing,
    *,
    from_version: str,
    quarantine: str | None,
    actor: str,
    comment: str,
) -> PublishResult:
    """Put back the routing `before` a release of `from_version` (abort, failure, rollback),
    and quarantine version `quarantine` of the service when given (rollback), in one
    revision. The prod found before is put back only while the release's `from_version` is
    still prod (another lane's release may have promoted its version meanwhile), and never
    when it is the version quarantined."""

    def change(document: dict[str, Any]) -> dict[str, Any]:
        override = dict(document["services"].get(service, {}))
        prod_before = before["prod"] or document["versions"]["prod"]
        prod_now = effective_versions(document, service)[0]
        if prod_now == from_version and prod_before != quarantine:
            _set(override, "prod", before["prod"])
        if lane == GRAY_LANE:
            for key in GRAY_MEMBER_KEYS:
                override.pop(key, None)
            override.update(before["member"] or {})
        document = with_override(document, service, override)
        if lane != GRAY_LANE:
            document = _with_member(document, service, lane, before["member"], actor)
        if quarantine is not None:
            quarantined = quarantined_of(document)
            quarantined[service] = [*quarantined.get(service, []), quarantine]
            document = with_quarantined(document, quarantined)
        return document

    action = "service.versions" if quarantine is None else "service.quarantine"
    return _publish(change, service, lane, action, actor, comment)


def promote(
    service: str, lane: str, before: Routing, *, to_version: str, actor: str, comment: str
) -> PublishResult:
    """`to_version` becomes the service's prod; its member entry in `lane` is put back as it
    was `before` the release, or removed if that entry was `to_version` already."""

    def change(document: dict[str, Any]) -> dict[str, Any]:
        override = {**document["services"].get(service, {}), "prod": to_version}
        member = before["member"]
        if lane == GRAY_LANE:
            for key in GRAY_MEMBER_KEYS:
                override.pop(key, None)
            gray_before = (member or {}).get("gray") or document["versions"]["gray"]
            if member and gray_before != to_version:
                override.update(member)
            return with_override(document, service, override)
        if member is not None and member["version"] == to_version:
            member = None
        return _with_member(
            with_override(document, service, override), service, lane, member, actor
        )

    return _publish(change, service, lane, "service.versions", actor, comment)


def _set(entries: dict[str, Any], key: str, value: Any) -> None:
    """`entries[key] = value`, None removing the key."""
    if value is None:
        entries.pop(key, None)
    else:
        entries[key] = value


def _with_member(
    document: dict[str, Any],
    service: str,
    lane: str,
    member: dict[str, Any] | None,
    actor: str,
) -> dict[str, Any]:
    """`document` with the service's member entry of lane `lane` (not gray) set, or removed
    (None). A lane deleted meanwhile has nothing to put back: deleting one that an active
    release routes in is refused (releases/apps.py), but a revision rollback may drop it."""
    lanes = lanes_of(document)
    if lane not in lanes:
        return document
    members = dict(lanes[lane]["members"])
    _set(members, service, member)
    lanes[lane] = stamped(lanes[lane], {**routing_of(lanes[lane]), "members": members}, actor)
    return with_lanes(document, lanes, gray_priority_of(document))


def _publish(
    change: Callable[[dict[str, Any]], dict[str, Any]],
    service: str,
    lane: str,
    action: str,
    actor: str,
    comment: str,
) -> PublishResult:
    def audit_view(document: dict[str, Any]) -> dict[str, Any]:
        view = {
            "override": document["services"].get(service, {}),
            "quarantined": quarantined_of(document).get(service, []),
        }
        if lane != GRAY_LANE:
            members = lanes_of(document).get(lane, {}).get("members", {})
            view[f"lanes.{lane}.members.{service}"] = members.get(service)
        return view

    return publish(
        change,
        actor=actor,
        source="release",
        action=action,
        object_label=f"service {service}",
        audit_view=audit_view,
        comment=comment,
        # A release is held by its own freeze check (releases/services.py), and its rollback
        # always runs.
        control=None,
    )
