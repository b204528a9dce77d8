"""The one flow of every editor of the live document (the gray policy, a lane, the gray
lane's place): preview the change as a diff, publish it with the revision the page was
loaded at as If-Match, and, when someone published meanwhile, re-apply the edit on top of
the newer revision (a three-way merge against the revision it was made on), so neither
change is lost; the diff then shows what the edit still changes. Bad input is shown on
the fields it concerns, and nothing is saved; so is a freeze window's refusal. A change of a
protected service is kept as a draft for review instead."""

from abc import ABC, abstractmethod
from typing import Any, ClassVar, Generic, TypeVar

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from accounts.roles import OPERATOR, has_role
from policy.change_control import DraftPending, Frozen
from policy.models import PolicyState, Revision
from policy.publishing import PublishResult, StaleRevision, load_state
from routing_engine import PolicyError, diff_documents, rebase_policy
from traffic.impact import preview

from .draft_views import notify_held
from .forms import PublishForm
from .impact import impact_lines

F = TypeVar("F", bound=PublishForm)


class Editor(ABC, Generic[F]):
    """What one editor page edits of the live document, and how it publishes it."""

    template: ClassVar[str]
    form_class: type[F]
    # Flashed to a user without the operator role who posts anyway.
    needs_operator: ClassVar[str]
    # After a preview, show the change as the engine normalised it rather than as typed
    # (the lane editor: the members in order, and empty rows for more).
    shows_proposal: ClassVar[bool] = False

    @abstractmethod
    def url(self) -> str:
        """Where the page is: the redirect after a change that changed nothing."""

    @abstractmethod
    def current(self, document: dict[str, Any]) -> dict[str, Any] | None:
        """What the page edits, as `document` holds it; None: not there (a new lane)."""

    @abstractmethod
    def fields(self, value: dict[str, Any], revision: int) -> dict[str, Any]:
        """The form's fields showing `value`, loaded at `revision`."""

    @abstractmethod
    def propose(self, form: F, document: dict[str, Any]) -> dict[str, Any]:
        """What the (valid) form proposes, as the engine normalises it; PolicyError."""

    @abstractmethod
    def publish(self, form: F, actor: str) -> PublishResult:
        """Publish the form's change with its revision as the expected one: PolicyError,
        StaleRevision."""

    def initial(self, document: dict[str, Any]) -> dict[str, Any]:
        """What the page shows before any edit."""
        value = self.current(document)
        assert value is not None, "an editor of something that is not there overrides this"
        return value

    def missing(self, document: dict[str, Any]) -> str | None:
        """Why the page has nothing to edit in `document` (a lane deleted), else None."""
        return None

    def gone_url(self) -> str:
        """Where to go when `missing` says the edited thing is gone."""
        return self.url()

    def context(self, state: PolicyState, form: F) -> dict[str, Any]:
        """What else the page's template shows."""
        return {}

    def draft(self, proposed: dict[str, Any], document: dict[str, Any]) -> dict[str, Any] | None:
        """`document` as the proposal would make it, for the impact preview (None: none)."""
        return None


def edit(request: HttpRequest, editor: Editor[F]) -> HttpResponse:
    state = load_state()
    gone = editor.missing(state.document)
    if request.method != "POST":
        if gone:
            raise Http404(gone)
        initial = editor.fields(editor.initial(state.document), state.revision)
        form = editor.form_class(initial=initial)
        return _page(request, editor, state, form)
    if not has_role(request.user, OPERATOR):
        messages.error(request, editor.needs_operator)
        return redirect(editor.url())
    if gone:
        messages.error(request, f"{gone} Nothing was saved.")
        return redirect(editor.gone_url())
    form = editor.form_class(request.POST)
    proposed = _proposal(editor, form, state.document)
    if proposed is None:
        return _page(request, editor, state, form, status=400)
    if request.POST.get("action") == "save":
        try:
            result = editor.publish(form, request.user.username)
        except PolicyError as exc:
            form.add_engine_errors(exc.errors)
            return _page(request, editor, state, form, status=400)
        except StaleRevision as exc:
            return _conflict(request, editor, form, exc.state, proposed)
        except Frozen as exc:
            form.add_error(None, str(exc))
            return _page(request, editor, state, form, status=409)
        except DraftPending as exc:
            notify_held(request, exc)
            return redirect(editor.url())
        if result.revision is None:
            messages.info(request, "Nothing changed: no new revision was published.")
            return redirect(editor.url())
        messages.success(request, f"Published revision {result.revision.number}.")
        return redirect("dashboard:revision", n=result.revision.number)
    if form.cleaned_data["revision"] != state.revision:
        return _conflict(request, editor, form, state, proposed)
    diff = diff_documents(editor.current(state.document), proposed)
    draft = editor.draft(proposed, state.document)
    if editor.shows_proposal:
        form = _form_showing(editor, proposed, state.revision, form.cleaned_data["comment"])
    impact = None if draft is None else impact_lines(preview(state, draft))
    return _page(request, editor, state, form, diff=diff, impact=impact)


def _form_showing(editor: Editor[F], value: dict[str, Any], revision: int, comment: str) -> F:
    """A form as the browser would post it showing `value`, loaded at `revision`."""
    fields = {**editor.fields(value, revision), "comment": comment}
    return editor.form_class(editor.form_class.post_data(fields))


def _proposal(editor: Editor[F], form: F, document: dict[str, Any]) -> dict[str, Any] | None:
    """What the form proposes; None, with the errors on the form, when it is not valid.
    The engine checks what passed the form's own checks even when the rest did not, so
    that every error shows at once (forms.CheckedElsewhere)."""
    own_checks_passed = form.is_valid()
    try:
        proposed = editor.propose(form, document)
    except PolicyError as exc:
        form.add_engine_errors(exc.errors)
        return None
    return proposed if own_checks_passed else None


def _conflict(
    request: HttpRequest, editor: Editor[F], form: F, state: PolicyState, proposed: dict[str, Any]
) -> HttpResponse:
    """Someone published first. The edit is re-applied on top of the newer revision: a
    three-way merge against the revision it was made on, so neither side's change is lost."""
    gone = editor.missing(state.document)
    if gone:
        messages.error(request, f"{gone} Nothing was saved.")
        return redirect(editor.gone_url())
    loaded = Revision.objects.filter(number=form.cleaned_data["revision"]).first()
    latest = editor.current(state.document)
    base = editor.current(loaded.config) if loaded else latest
    clashes: list[str] = []
    if base is None or latest is None:
        # A new lane: nothing to merge it with (a lane of its name made meanwhile is a
        # name taken, which the proposal below says).
        merged = proposed
    else:
        merged, clashes = rebase_policy(base, proposed, latest)
    form = _form_showing(editor, merged, state.revision, form.cleaned_data["comment"])
    _proposal(editor, form, state.document)
    diff = diff_documents(latest, merged)
    return _page(
        request, editor, state, form, status=409, diff=diff, conflict=state, clashes=clashes
    )


def _page(
    request: HttpRequest,
    editor: Editor[F],
    state: PolicyState,
    form: F,
    *,
    status: int = 200,
    diff: list[dict[str, Any]] | None = None,
    conflict: PolicyState | None = None,
    clashes: list[str] | None = None,
    impact: list[str] | None = None,
) -> HttpResponse:
    context = {
        "state": state,
        "form": form,
        "invalid": form.is_bound and not form.is_valid(),
        "diff": diff,
        "impact": impact,
        "conflict": conflict,
        "clashes": clashes or [],
        **editor.context(state, form),
    }
    return render(request, editor.template, context, status=status)
