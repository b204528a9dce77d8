"""The drafts pages: changes of protected services waiting for another operator's approval
(policy/drafts.py), listed, shown with their diff against the live document, approved or
rejected by the same use cases as `POST /api/v1/policy/drafts/{id}/approve/` and
`.../reject/`, so the same rules hold (not by their author, not once the policy moved on,
not inside a freeze window)."""

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.html import format_html
from django.views.decorators.http import require_POST

from accounts.decorators import role_required
from accounts.roles import OPERATOR, VIEWER
from policy import drafts
from policy.change_control import DraftPending, Frozen
from policy.models import PolicyDraft
from policy.publishing import load_state

# Decided drafts listed below the pending ones, newest first.
RECENT_DECIDED = 25


def notify_held(request: HttpRequest, held: DraftPending) -> None:
    """Tell the operator whose change became a draft where it waits."""
    draft = held.draft
    messages.info(
        request,
        format_html(
            "Saved as draft {}, waiting for another operator's approval: it changes protected "
            'services ({}). <a href="{}">See draft {}</a>',
            draft.pk,
            ", ".join(draft.services),
            reverse("dashboard:draft", args=[draft.pk]),
            draft.pk,
        ),
    )


@role_required(VIEWER)
def draft_list(request: HttpRequest) -> HttpResponse:
    decided = PolicyDraft.objects.exclude(state=PolicyDraft.PENDING)
    return render(
        request,
        "dashboard/drafts.html",
        {
            "pending": PolicyDraft.objects.filter(state=PolicyDraft.PENDING),
            "decided": decided[:RECENT_DECIDED],
            "state": load_state(),
        },
    )


@role_required(VIEWER)
def draft_detail(request: HttpRequest, pk: int) -> HttpResponse:
    draft = get_object_or_404(PolicyDraft, pk=pk)
    pending = draft.state == PolicyDraft.PENDING
    return render(
        request,
        "dashboard/draft_detail.html",
        {
            "draft": draft,
            "pending": pending,
            "diff": drafts.diff_of(draft) if pending else None,
            "state": load_state(),
        },
    )


@require_POST
@role_required(OPERATOR)
def draft_decide(request: HttpRequest, pk: int, decision: str) -> HttpResponse:
    draft = get_object_or_404(PolicyDraft, pk=pk)
    actor, reason = request.user.username, request.POST.get("reason", "").strip()[:500]
    try:
        if decision == "reject":
            drafts.reject(draft.pk, actor=actor, source="ui", reason=reason)
            messages.success(request, f"Draft {draft.pk} rejected: nothing was published.")
            return redirect("dashboard:draft", pk=draft.pk)
        result = drafts.approve(draft.pk, actor=actor, source="ui", reason=reason)
    except (drafts.NotAllowed, drafts.NotPending, Frozen) as exc:
        messages.error(request, str(exc))
        return redirect("dashboard:draft", pk=draft.pk)
    if result.revision is None:
        messages.info(request, f"Draft {draft.pk} approved: its content was live already.")
        return redirect("dashboard:draft", pk=draft.pk)
    messages.success(
        request, f"Draft {draft.pk} approved: published revision {result.revision.number}."
    )
    return redirect("dashboard:revision", n=result.revision.number)
