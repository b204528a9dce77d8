"""Change control of the live document, for changes people make (a release's own routing is
not controlled: releases are held by their freeze check, releases/services.py).

A change is "of" every service whose routing it can change (services_changed). Inside a
freeze window covering one of them it is refused (Frozen), unless an admin gives a reason to
override; the publish's audit entry then carries that reason. A change of a protected service
is not published but kept as a draft for another operator (DraftPending; policy/drafts.py)."""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from audit import log as audit_log
from policy.documents import effective_versions
from policy.freezes import active_freezes, covering, describe
from policy.lanes import gray_priority_of, lanes_of, quarantined_of, routing_of
from policy.models import Freeze, PolicyDraft, PolicyState
from registry_sync.models import Instance, Service

# Gray rules that switch every lane, not only the gray one.
EVERY_LANE_RULES = ("enabled", "routing", "user_header", "city_header")


@dataclass(frozen=True)
class Control:
    """How a person's change is controlled: an admin's reason to change inside a freeze
    (empty: none), and whether a change of a protected service is held as a draft (not when
    it is a draft being approved)."""

    freeze_override: str = ""
    drafts: bool = True


class Frozen(Exception):
    """A freeze window holds a service the change is of (409)."""

    def __init__(self, freeze: Freeze, service: str):
        super().__init__(
            f"{service} is frozen by {describe(freeze)}. Nothing was changed; an admin may "
            'override with "freeze_override": "<reason>".'
        )
        self.freeze = freeze


class DraftPending(Exception):
    """The change touches a protected service: it waits as `draft` (202)."""

    def __init__(self, draft: PolicyDraft):
        super().__init__(
            f"It changes protected services ({', '.join(draft.services)}): it waits as draft "
            f"{draft.pk} for another operator's approval."
        )
        self.draft = draft


def _members(lane: Mapping[str, Any] | None) -> set[str]:
    return set(lane["members"]) if lane else set()


def _with_gray_version(document: dict[str, Any], services: Iterable[str]) -> set[str]:
    """The services whose gray version differs from their prod version and has instances:
    those the gray lane can route (elsewhere its requests fall back to prod anyway)."""
    grays = {}
    for service in services:
        prod, gray = effective_versions(document, service)
        if gray != prod:
            grays[service] = gray
    running = Instance.objects.filter(service__name__in=grays).exclude(state=Instance.DOWN)
    return {
        service
        for service, version in running.values_list("service__name", "version").distinct()
        if grays[service] == version
    }


def services_changed(before: dict[str, Any], after: dict[str, Any]) -> set[str]:
    """Every service whose routing the change from `before` to `after` can change: those
    whose override, quarantine or lane membership changed; every member of a lane whose
    rules changed (or that came or went); for a gray rule change, every service with a gray
    version; for a rule that switches all lanes or a change of the lanes' order, the members
    of every lane as well; for a default version, every service."""
    known = set(Service.objects.values_list("name", flat=True))
    known |= set(before["services"]) | set(after["services"])
    changed = {s for s in known if before["services"].get(s) != after["services"].get(s)}
    q_before, q_after = quarantined_of(before), quarantined_of(after)
    changed |= {s for s in set(q_before) | set(q_after) if q_before.get(s) != q_after.get(s)}
    if before["versions"] != after["versions"]:
        changed |= known
    lanes_before, lanes_after = lanes_of(before), lanes_of(after)
    every_member: set[str] = set()
    reordered = gray_priority_of(before) != gray_priority_of(after)
    for name in set(lanes_before) | set(lanes_after):
        old, new = lanes_before.get(name), lanes_after.get(name)
        every_member |= _members(old) | _members(new)
        if old is not None and new is not None and routing_of(old) == routing_of(new):
            continue
        rules_old = {k: v for k, v in routing_of(old or {}).items() if k != "members"}
        rules_new = {k: v for k, v in routing_of(new or {}).items() if k != "members"}
        if old is None or new is None or rules_old != rules_new:
            changed |= _members(old) | _members(new)
            reordered |= old is None or new is None or old["priority"] != new["priority"]
        else:
            members_old, members_new = old["members"], new["members"]
            changed |= {
                s
                for s in set(members_old) | set(members_new)
                if members_old.get(s) != members_new.get(s)
            }
    rules = before["gray"].keys() | after["gray"].keys()
    gray_rules = {k for k in rules if before["gray"].get(k) != after["gray"].get(k)}
    if gray_rules or reordered:
        changed |= _with_gray_version(before, known) | _with_gray_version(after, known)
    if reordered or gray_rules & set(EVERY_LANE_RULES):
        changed |= every_member
    return changed


def check_freezes(services: Iterable[str], control: Control) -> dict[str, Any] | None:
    """Frozen when a window holds one of `services` and there is no override; with one, what
    the audit entry records of it (None when no window holds any)."""
    current = active_freezes()
    frozen: dict[str, Freeze] = {}
    for service in sorted(services):
        freeze = covering(current, service)
        if freeze is not None:
            frozen[service] = freeze
    if not frozen:
        return None
    if not control.freeze_override:
        service, freeze = next(iter(frozen.items()))
        raise Frozen(freeze, service)
    return {
        "reason": control.freeze_override,
        "freezes": sorted({freeze.pk for freeze in frozen.values()}),
        "services": list(frozen),
    }


def protected_among(services: Iterable[str]) -> list[str]:
    return sorted(
        Service.objects.filter(name__in=list(services), protected=True).values_list(
            "name", flat=True
        )
    )


def hold_as_draft(
    state: PolicyState,
    content: str,
    protected: list[str],
    *,
    actor: str,
    source: str,
    action: str,
    object_label: str,
    comment: str,
) -> PolicyDraft:
    """Keep the document `content` proposed on the live `state` as a pending draft."""
    draft = PolicyDraft.objects.create(
        author=actor,
        source=source,
        action=action,
        object_label=object_label,
        comment=comment,
        base_revision=state.revision,
        content=content,
        services=protected,
    )
    audit_log.record(
        actor=actor,
        source=source,
        action="draft.create",
        object_label=f"draft {draft.pk} ({object_label})",
        before=None,
        after={"base_revision": state.revision, "services": protected, "comment": comment},
    )
    return draft


def set_protected(service: Service, protected: bool, *, actor: str, source: str) -> None:
    """Protect a service (its routing changes wait as drafts) or lift that (audited)."""
    if service.protected == protected:
        return
    service.protected = protected
    service.save(update_fields=["protected"])
    audit_log.record(
        actor=actor,
        source=source,
        action="service.protect",
        object_label=f"service {service.name}",
        before={"protected": not protected},
        after={"protected": protected},
    )
