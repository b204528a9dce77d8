"""Drafts: changes of protected services waiting for another operator (policy/change_control.py
holds them). Approving one publishes the document it proposes, only while the live document
is still at the revision it was made on; otherwise it stays pending, to be submitted again
on the newer revision or rejected."""

from django.db import transaction
from django.utils import timezone

from audit import log as audit_log
from policy.change_control import Control
from policy.models import PolicyDraft
from policy.publishing import PublishResult, StaleRevision, load_state, publish
from routing_engine import diff_documents


class NotAllowed(Exception):
    """Its author cannot approve a draft (403)."""


class NotPending(Exception):
    """The draft was decided already, or the live policy moved on since it was made (409)."""


def diff_of(draft: PolicyDraft) -> list[dict]:
    """What approving it would change now, as a revision's diff shows it."""
    return diff_documents(load_state().document, draft.document)


def _pending(draft_id: int) -> PolicyDraft:
    draft = PolicyDraft.objects.select_for_update().get(pk=draft_id)
    if draft.state != PolicyDraft.PENDING:
        raise NotPending(f"Draft {draft.pk} was {draft.state} by {draft.decided_by} already.")
    return draft


def _decided(draft: PolicyDraft, state: str, actor: str, source: str, reason: str) -> None:
    draft.state, draft.decided_by, draft.decided_at = state, actor, timezone.now()
    draft.reason = reason
    draft.save()
    audit_log.record(
        actor=actor,
        source=source,
        action=f"draft.{'approve' if state == PolicyDraft.APPROVED else 'reject'}",
        object_label=f"draft {draft.pk} ({draft.object_label})",
        before={"state": PolicyDraft.PENDING, "author": draft.author},
        after={"state": state, "reason": reason},
    )


def approve(
    draft_id: int, *, actor: str, source: str, reason: str = "", freeze_override: str = ""
) -> PublishResult:
    """Publish the draft as a revision made by `actor`, crediting its author. DoesNotExist,
    NotAllowed, NotPending (also when the live policy moved on), Frozen."""
    with transaction.atomic():
        draft = _pending(draft_id)
        if draft.author == actor:
            raise NotAllowed(f"Draft {draft.pk} is yours: another operator approves it.")
        credit = f"Draft {draft.pk} by {draft.author}, approved by {actor}"
        try:
            result = publish(
                lambda _: draft.document,
                actor=actor,
                source=source,
                action=draft.action,
                object_label=draft.object_label,
                audit_view=lambda document: document,
                expected_revision=draft.base_revision,
                comment=f"{credit}: {draft.comment}" if draft.comment else f"{credit}.",
                control=Control(freeze_override=freeze_override, drafts=False),
            )
        except StaleRevision as exc:
            raise NotPending(
                f"The live policy moved on since draft {draft.pk} was made on revision "
                f"{draft.base_revision} (it is at {exc.state.revision}): submit the change "
                "again, or reject this draft."
            ) from None
        _decided(draft, PolicyDraft.APPROVED, actor, source, reason)
    return result


def reject(draft_id: int, *, actor: str, source: str, reason: str = "") -> PolicyDraft:
    """Drop the draft (its author may withdraw it too); DoesNotExist, NotPending."""
    with transaction.atomic():
        draft = _pending(draft_id)
        _decided(draft, PolicyDraft.REJECTED, actor, source, reason)
    return draft
