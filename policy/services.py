"""Use cases on the live document, shared by the API and the dashboard. Each publishes
through policy.publishing (one locked write path, a revision and an audit entry)."""

import json
from collections import Counter
from typing import Any

from django.db.models import BooleanField, Count, ExpressionWrapper, Q

from policy.documents import (
    check_overrides_still_valid,
    document_from_policy,
    effective_versions,
    normalize_override,
    policy_of,
    with_override,
)
from policy.models import Revision
from policy.publishing import PublishResult, publish
from registry_sync.models import Instance, Service
from routing_engine import merge_patch, normalize_policy


def update_policy(
    data: dict,
    *,
    partial: bool,
    actor: str,
    source: str,
    expected_revision: int | None,
    comment: str = "",
) -> PublishResult:
    """Replace (or, `partial`, merge-patch) the gray policy. Raises PolicyError with field
    messages, or StaleRevision when `expected_revision` is not the live one."""

    def change(document: dict[str, Any]) -> dict[str, Any]:
        current = policy_of(document)
        policy = normalize_policy(merge_patch(current, data) if partial else data)
        check_overrides_still_valid(policy, document["services"])
        return document_from_policy(policy, document["services"])

    return publish(
        change,
        actor=actor,
        source=source,
        action="policy.update",
        object_label="gray policy",
        audit_view=policy_of,
        expected_revision=expected_revision,
        comment=comment,
    )


def set_service_versions(
    service: str,
    changes: dict,
    *,
    actor: str,
    source: str,
    expected_revision: int | None = None,
    comment: str = "",
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
    )


def rollback_to(
    target: Revision, *, actor: str, expected_revision: int | None = None, comment: str = ""
) -> PublishResult:
    """Publish revision `target`'s content as a new revision."""
    document = json.loads(target.content)
    return publish(
        lambda _current: document,
        actor=actor,
        source="rollback",
        action="revision.rollback",
        object_label=f"revision {target.number}",
        audit_view=lambda doc: doc,
        expected_revision=expected_revision,
        comment=comment or f"Rollback to revision {target.number}.",
        rolled_back_from=target.number,
    )


# The key of a service's `instances` counts that counts its instances without a version.
NO_VERSION = "no_version"


def service_rows(services: list[Service], document: dict) -> list[dict]:
    """Services as the API and the pages show them: effective versions, the override, and
    instance counts by state, with `no_version`: how many of them have no version."""
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
            }
        )
    return rows
