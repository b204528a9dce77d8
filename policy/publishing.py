"""The only way the live document changes: under a row lock, with an optional expected
revision (If-Match), producing an immutable revision and an audit entry in the same
transaction, and announcing it after commit."""

from collections.abc import Callable
from dataclasses import dataclass

from django.db import IntegrityError, transaction
from django.dispatch import Signal
from django.utils import timezone

from audit import log as audit_log
from policy.change_control import (
    Control,
    DraftPending,
    check_freezes,
    hold_as_draft,
    protected_among,
    services_changed,
)
from policy.documents import default_document
from policy.models import PolicyState, Revision
from routing_engine import canonical_json, checksum, diff_documents

# A person's change with no freeze override: frozen in a window, a draft for a protected service.
PERSON = Control()

# Sent after commit with `revision` (the new Revision); gateways and the live view listen.
revision_published = Signal()


class StaleRevision(Exception):
    def __init__(self, state: PolicyState):
        super().__init__(f"The policy changed: it is at revision {state.revision} now.")
        self.state = state


@dataclass
class PublishResult:
    state: PolicyState
    revision: Revision | None  # None when the change was a no-op

    @property
    def changed(self) -> bool:
        return self.revision is not None


def load_state() -> PolicyState:
    state = PolicyState.objects.filter(pk=1).first()
    return state if state is not None else _create_initial_state()


def _create_initial_state() -> PolicyState:
    content = canonical_json(default_document())
    try:
        with transaction.atomic():
            Revision.objects.create(
                number=1,
                content=content,
                checksum=checksum(default_document()),
                diff=diff_documents(None, default_document()),
                author="",
                source="api",
                comment="Initial default policy.",
            )
            return PolicyState.objects.create(
                pk=1, revision=1, content=content, updated_at=timezone.now()
            )
    except IntegrityError:
        # Another process created it first; theirs is as good as ours.
        return PolicyState.objects.get(pk=1)


def _audit_part(document: dict, keys: set[str]) -> dict:
    return {key: document.get(key) for key in sorted(keys)}


def changed_keys(before: dict, after: dict) -> set[str]:
    return {key for key in before.keys() | after.keys() if before.get(key) != after.get(key)}


def publish(
    change: Callable[[dict], dict],
    *,
    actor: str,
    source: str,
    action: str,
    object_label: str,
    audit_view: Callable[[dict], dict],
    expected_revision: int | None = None,
    comment: str = "",
    rolled_back_from: int | None = None,
    control: Control | None = PERSON,
) -> PublishResult:
    """Apply `change` (document -> new document; may raise PolicyError) to the live document.

    `audit_view` picks what the audit entry records of a document (for example the policy
    fields, or one service's override); only the parts that changed are recorded.

    A person's change (`control`; None for a release's own) may raise Frozen, or be kept as
    a draft instead, raising DraftPending (policy/change_control.py)."""
    draft = None
    with transaction.atomic():
        state = PolicyState.objects.select_for_update().filter(pk=1).first()
        if state is None:  # a fresh installation: its initial revision first
            _create_initial_state()
            state = PolicyState.objects.select_for_update().get(pk=1)
        if expected_revision is not None and expected_revision != state.revision:
            raise StaleRevision(state)
        before = state.document
        after = change(before)
        content = canonical_json(after)
        if content == state.content:
            return PublishResult(state=state, revision=None)
        overridden = None
        if control is not None:
            services = services_changed(before, after)
            overridden = check_freezes(services, control)
            protected = protected_among(services) if control.drafts else []
            if protected:
                draft = hold_as_draft(
                    state,
                    content,
                    protected,
                    actor=actor,
                    source=source,
                    action=action,
                    object_label=object_label,
                    comment=comment,
                )
        if draft is None:
            revision = Revision.objects.create(
                number=state.revision + 1,
                content=content,
                checksum=checksum(after),
                diff=diff_documents(before, after),
                author=actor,
                source=source,
                comment=comment,
                rolled_back_from=rolled_back_from,
            )
            state.revision = revision.number
            state.content = content
            state.updated_at = timezone.now()
            state.updated_by = actor
            state.save()
            audit_before, audit_after = audit_view(before), audit_view(after)
            keys = changed_keys(audit_before, audit_after)
            override = {"freeze_override": overridden} if overridden else {}
            audit_log.record(
                actor=actor,
                source=source,
                action=action,
                object_label=object_label,
                before={"revision": revision.number - 1, **_audit_part(audit_before, keys)},
                after={"revision": revision.number, **_audit_part(audit_after, keys), **override},
            )
            # send_robust: a listener that fails is logged and must not fail this saved change.
            transaction.on_commit(
                lambda: revision_published.send_robust(sender=Revision, revision=revision)
            )
    if draft is not None:
        raise DraftPending(draft)
    return PublishResult(state=state, revision=revision)
