"""Use cases on the live document, shared by the API and the dashboard. Each publishes
through policy.publishing (one locked write path, a revision and an audit entry)."""

import json
from collections import Counter
from collections.abc import Callable
from typing import Any

from django.db.models import BooleanField, Count, ExpressionWrapper, Q

from policy.change_control import Control
from policy.documents import (
    check_overrides_still_valid,
    document_from_policy,
    effective_versions,
    normalize_override,
    policy_of,
    with_override,
)
from policy.lanes import (
    GRAY_MEMBER_KEYS,
    check_lanes_removable,
    checked_new_lane,
    gray_lane_payload,
    gray_members,
    gray_priority_of,
    lane_payload,
    lanes_of,
    quarantined_of,
    routing_of,
    stamped,
    with_lanes,
    with_quarantined,
)
from policy.models import PolicyState, Revision
from policy.publishing import PublishResult, publish
from registry_sync.models import Instance, Service
from routing_engine import PolicyError, merge_patch, normalize_policy
from routing_engine.lanes import GRAY_LANE, MATCH_FIELDS, merge_lane_patch, normalize_lane


def update_policy(
    data: dict,
    *,
    partial: bool,
    actor: str,
    source: str,
    expected_revision: int | None,
    comment: str = "",
    freeze_override: str = "",
) -> PublishResult:
    """Replace (or, `partial`, merge-patch) the gray policy. Raises PolicyError with field
    messages, or StaleRevision when `expected_revision` is not the live one."""
    return publish(
        lambda document: with_policy(document, data, partial=partial),
        actor=actor,
        source=source,
        action="policy.update",
        object_label="gray policy",
        audit_view=policy_of,
        expected_revision=expected_revision,
        comment=comment,
        control=Control(freeze_override=freeze_override),
    )


def with_policy(document: dict[str, Any], data: Any, *, partial: bool) -> dict[str, Any]:
    """`document` with its gray policy replaced (or merge-patched) by `data`; PolicyError."""
    current = policy_of(document)
    policy = normalize_policy(merge_patch(current, data) if partial else data)
    check_overrides_still_valid(policy, document["services"], current)
    return {**document, **document_from_policy(policy, document["services"])}


def set_service_versions(
    service: str,
    changes: dict,
    *,
    actor: str,
    source: str,
    expected_revision: int | None = None,
    comment: str = "",
    freeze_override: str = "",
) -> PublishResult:
    """Apply `{"prod_version", "gray_version", "percent", "targeted"}` (null inherits the
    default) to one service's override. Raises PolicyError or StaleRevision like
    update_policy."""

    def change(document: dict[str, Any]) -> dict[str, Any]:
        return with_override(document, service, normalize_override(document, service, changes))

    return publish(
        change,
        actor=actor,
        source=source,
        action="service.versions",
        object_label=f"service {service}",
        audit_view=lambda doc: {"override": doc["services"].get(service, {})},
        expected_revision=expected_revision,
        comment=comment,
        control=Control(freeze_override=freeze_override),
    )


def rollback_to(
    target: Revision,
    *,
    actor: str,
    expected_revision: int | None = None,
    comment: str = "",
    freeze_override: str = "",
) -> PublishResult:
    """Publish revision `target`'s content as a new revision. LaneInUse when that would
    remove a lane still in use."""
    document = json.loads(target.content)

    def change(current: dict[str, Any]) -> dict[str, Any]:
        check_lanes_removable(set(lanes_of(current)) - set(lanes_of(document)))
        return document

    return publish(
        change,
        actor=actor,
        source="rollback",
        action="revision.rollback",
        object_label=f"revision {target.number}",
        audit_view=lambda doc: doc,
        expected_revision=expected_revision,
        comment=comment or f"Rollback to revision {target.number}.",
        rolled_back_from=target.number,
        control=Control(freeze_override=freeze_override),
    )


# -- lanes and quarantines -------------------------------------------------------------------


def _lane_audit(name: str) -> Callable[[dict], dict]:
    if name == GRAY_LANE:
        return lambda doc: {
            "policy": policy_of(doc),
            "gray_priority": gray_priority_of(doc),
            "services": doc["services"],
        }
    return lambda doc: {"lane": routing_of(lanes_of(doc)[name]) if name in lanes_of(doc) else None}


def create_lane(
    name: Any,
    data: dict,
    *,
    actor: str,
    source: str,
    expected_revision: int | None = None,
    comment: str = "",
    freeze_override: str = "",
) -> PublishResult:
    """A new lane (not `gray`); PolicyError with field messages, StaleRevision."""
    return publish(
        lambda document: with_new_lane(document, name, data, actor),
        actor=actor,
        source=source,
        action="lane.create",
        object_label=f"lane {name}",
        audit_view=_lane_audit(str(name)),
        expected_revision=expected_revision,
        comment=comment,
        control=Control(freeze_override=freeze_override),
    )


def update_lane(
    name: str,
    data: dict,
    *,
    partial: bool,
    actor: str,
    source: str,
    expected_revision: int | None = None,
    comment: str = "",
    freeze_override: str = "",
) -> PublishResult:
    """Replace (or, `partial`, merge-patch) a lane. The gray lane is the policy: its match
    and `enabled` are the policy's, its members the services' gray versions, percent and
    targeted, its priority the document's `gray_priority`. LookupError: no such lane."""
    return publish(
        lambda document: with_lane(document, name, data, partial=partial, actor=actor),
        actor=actor,
        source=source,
        action="lane.update",
        object_label=f"lane {name}",
        audit_view=_lane_audit(name),
        expected_revision=expected_revision,
        comment=comment,
        control=Control(freeze_override=freeze_override),
    )


def with_new_lane(document: dict[str, Any], name: Any, data: dict, actor: str) -> dict[str, Any]:
    """`document` with a new lane `name` (not `gray`); PolicyError with field messages."""
    lanes = lanes_of(document)
    lanes[str(name)] = stamped(None, checked_new_lane(name, data, lanes), actor)
    return with_lanes(document, lanes, gray_priority_of(document))


def with_lane(
    document: dict[str, Any], name: str, data: Any, *, partial: bool, actor: str
) -> dict[str, Any]:
    """`document` with lane `name` replaced (or merge-patched) by `data` (see update_lane);
    PolicyError, LookupError when there is no such lane."""
    if name == GRAY_LANE:
        return _gray_lane_changed(document, data, partial=partial)
    lanes = lanes_of(document)
    if name not in lanes:
        raise LookupError(name)
    before = lanes[name]
    lane = normalize_lane(merge_lane_patch(routing_of(before), data) if partial else data)
    lanes[name] = stamped(before, lane, actor)
    return with_lanes(document, lanes, gray_priority_of(document))


def _gray_lane_changed(document: dict[str, Any], data: Any, *, partial: bool) -> dict[str, Any]:
    policy = policy_of(document)
    current = {
        "priority": gray_priority_of(document),
        "enabled": policy["enabled"],
        "match": {key: policy[key] for key in MATCH_FIELDS},
        "members": gray_members(document, ()),
    }
    lane = normalize_lane(merge_lane_patch(current, data) if partial else data)
    new_policy = normalize_policy({**policy, **lane["match"], "enabled": lane["enabled"]})
    services = {name: dict(override) for name, override in document["services"].items()}
    defaults = new_policy["versions"]
    for name in set(services) - set(lane["members"]):
        # A whole lane sent without a service: its gray routing is the default again.
        for key in GRAY_MEMBER_KEYS:
            services[name].pop(key, None)
    for name, member in lane["members"].items():
        override = services.setdefault(name, {})
        override["gray"] = member["version"]
        if member["version"] == defaults["gray"]:
            override.pop("gray")
        before = document["services"].get(name, {})
        if "percent" not in before and member["percent"] == new_policy["percent"]:
            override.pop("percent", None)  # the policy's percent, not one of its own
        else:
            override["percent"] = member["percent"]
        if member["targeted"]:
            override.pop("targeted", None)
        else:
            override["targeted"] = False
        override.pop("mirror", None)
        if "mirror" in member:
            override["mirror"] = member["mirror"]
    errors: dict[str, list[str]] = {}
    for name, override in services.items():
        prod = override.get("prod") or defaults["prod"]
        gray = override.get("gray") or defaults["gray"]
        before = document["services"].get(name, {})
        if prod == gray and (before.get("gray") or defaults["gray"]) != gray:
            errors[f"members.{name}.version"] = [f"Must differ from the prod version ({prod})."]
    if errors:
        raise PolicyError(errors)
    services = {name: override for name, override in sorted(services.items()) if override}
    changed = {**document, **document_from_policy(new_policy, services)}
    return with_lanes(changed, lanes_of(document), lane["priority"])


def delete_lane(
    name: str,
    *,
    actor: str,
    source: str,
    expected_revision: int | None = None,
    comment: str = "",
    freeze_override: str = "",
) -> PublishResult:
    """LookupError: no such lane; PolicyError for the gray lane; LaneInUse for a lane still
    in use (an active release routes in it)."""

    def change(document: dict[str, Any]) -> dict[str, Any]:
        if name == GRAY_LANE:
            raise PolicyError({"name": ["The built-in gray lane cannot be deleted."]})
        lanes = lanes_of(document)
        if name not in lanes:
            raise LookupError(name)
        check_lanes_removable([name])
        del lanes[name]
        return with_lanes(document, lanes, gray_priority_of(document))

    return publish(
        change,
        actor=actor,
        source=source,
        action="lane.delete",
        object_label=f"lane {name}",
        audit_view=_lane_audit(name),
        expected_revision=expected_revision,
        comment=comment,
        control=Control(freeze_override=freeze_override),
    )


def lane_rows(state: PolicyState) -> list[dict]:
    """Every lane, gray included, as the API answers them, in the order they are tried
    (ascending priority, then name; a lane not enabled is not tried)."""
    rows = [_gray_lane_row(state)]
    rows += [lane_payload(name, lane) for name, lane in lanes_of(state.document).items()]
    return sorted(rows, key=lambda row: (row["priority"], row["name"]))


def lane_row(state: PolicyState, name: str) -> dict | None:
    if name == GRAY_LANE:
        return _gray_lane_row(state)
    lane = lanes_of(state.document).get(name)
    return None if lane is None else lane_payload(name, lane)


def _gray_lane_row(state: PolicyState) -> dict:
    services = Service.objects.values_list("name", flat=True)
    stamp = state.updated_at.isoformat().replace("+00:00", "Z")
    return gray_lane_payload(state.document, services, stamp, state.updated_by)


def quarantine_version(
    service: str, version: str, *, actor: str, source: str, comment: str = ""
) -> PublishResult:
    """`version` of `service` gets no traffic at all until lift_quarantine. A safety
    measure, as a release's rollback: never frozen nor held as a draft."""

    def change(document: dict[str, Any]) -> dict[str, Any]:
        quarantined = quarantined_of(document)
        quarantined[service] = [*quarantined.get(service, []), version]
        return with_quarantined(document, quarantined)

    return publish(
        change,
        actor=actor,
        source=source,
        action="service.quarantine",
        object_label=f"service {service}",
        audit_view=lambda doc: {"quarantined": quarantined_of(doc).get(service, [])},
        comment=comment,
        control=None,
    )


def lift_quarantine(
    service: str,
    version: str,
    *,
    actor: str,
    source: str,
    comment: str = "",
    freeze_override: str = "",
) -> PublishResult:
    """LookupError when `version` of `service` is not quarantined."""

    def change(document: dict[str, Any]) -> dict[str, Any]:
        quarantined = quarantined_of(document)
        if version not in quarantined.get(service, []):
            raise LookupError(f"{version} of {service} is not quarantined.")
        quarantined[service] = [v for v in quarantined[service] if v != version]
        return with_quarantined(document, quarantined)

    return publish(
        change,
        actor=actor,
        source=source,
        action="service.quarantine_lifted",
        object_label=f"service {service}",
        audit_view=lambda doc: {"quarantined": quarantined_of(doc).get(service, [])},
        comment=comment,
        control=Control(freeze_override=freeze_override),
    )


# The key of a service's `instances` counts that counts its instances without a version.
NO_VERSION = "no_version"


def service_rows(services: list[Service], document: dict) -> list[dict]:
    """Services as the API and the pages show them: effective versions, the override,
    instance counts by state (with `no_version`: how many of them have no version), the
    lanes it is a member of (lane -> version) and its quarantined versions."""
    counts: dict[int, Counter] = {}
    for row in (
        Instance.objects.filter(service__in=services)
        .values("service_id", "state", bare=ExpressionWrapper(Q(version=None), BooleanField()))
        .annotate(n=Count("id"))
    ):
        counted = counts.setdefault(row["service_id"], Counter())
        counted[row["state"]] += row["n"]
        if row["bare"]:
            counted[NO_VERSION] += row["n"]
    rows = []
    lanes = lanes_of(document)
    quarantined = quarantined_of(document)
    for service in services:
        prod, gray = effective_versions(document, service.name)
        rows.append(
            {
                "name": service.name,
                "registry": service.registry.name if service.registry else None,
                "prod_version": prod,
                "gray_version": gray,
                "override": document["services"].get(service.name, {}),
                "instances": dict(sorted(counts.get(service.pk, Counter()).items())),
                "lanes": {
                    name: lane["members"][service.name]["version"]
                    for name, lane in lanes.items()
                    if service.name in lane["members"]
                },
                "quarantined": quarantined.get(service.name, []),
                "protected": service.protected,
            }
        )
    return rows
