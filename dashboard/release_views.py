"""The releases pages: the list of releases and bundles with the forms that make them, a
release's steps, timeline, webhook deliveries and the operator's actions, a bundle's
releases in dependency order and its actions. The same use cases as the API
(releases.services, releases.bundles), validated by the API's serializers."""

import time
from datetime import datetime

from django.contrib import messages
from django.core.paginator import Paginator
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_POST

from accounts.decorators import role_required
from accounts.roles import OPERATOR, VIEWER, has_role
from releases import bundles, outcomes, schedules, services, shadow, states
from releases.bundle_order import order_warnings
from releases.chart import release_chart
from releases.filters import ReleaseFilter
from releases.insufficient_data import repeated_hint
from releases.models import Release, ReleaseBundle, ReleaseEvent, Webhook, WebhookDelivery
from releases.serializers import (
    BundleCreateSerializer,
    ReleaseCreateSerializer,
    ReleaseSerializer,
    ReleaseStartSerializer,
)

from .forms import BundleForm, FreezeForm, ReleaseForm
from .pickers import pickers
from .release_confirms import bundle_confirmations, confirmations

# Bundles on the releases page, newest first; an older one is a link on its releases' pages.
LISTED_BUNDLES = 25


@role_required(VIEWER)
def releases(request: HttpRequest) -> HttpResponse:
    form = ReleaseForm(initial={"service": request.GET.get("service", "")})
    status = 200
    if request.method == "POST":
        if not has_role(request.user, OPERATOR):
            messages.error(request, "Starting a release needs the operator role.")
            return redirect("dashboard:releases")
        form = ReleaseForm(request.POST)
        release = _create(request, form)
        if release is not None:
            return redirect("dashboard:release", pk=release.pk)
        status = 400
    return releases_page(request, form, BundleForm(), status)


def releases_page(
    request: HttpRequest,
    form: ReleaseForm,
    bundle_form: BundleForm,
    status: int,
    freeze_form: FreezeForm | None = None,
) -> HttpResponse:
    listed = ReleaseFilter(request.GET, queryset=Release.objects.all())
    offered = pickers([str(form["service"].value() or "").strip()])
    offered.pair(form["service"], form["to_version"], form["from_version"])
    page = Paginator(listed.qs if listed.is_valid() else Release.objects.none(), 25).get_page(
        request.GET.get("page")
    )
    return render(
        request,
        "dashboard/releases.html",
        {
            "page": page,
            "filter": listed,
            "form": form,
            "bundle_form": bundle_form,
            "bundles": _listed_bundles(),
            "bundle_count": ReleaseBundle.objects.count(),
            "upcoming": schedules.upcoming(),
            "freeze_form": freeze_form or FreezeForm(),
            "now": timezone.now(),
            "states": states.STATES,
            "pickers": offered,
            "outcomes": outcomes.per_service(service=request.GET.get("service") or None),
        },
        status=status,
    )


def _listed_bundles() -> list[ReleaseBundle]:
    return list(ReleaseBundle.objects.prefetch_related("releases")[:LISTED_BUNDLES])


def _create(request: HttpRequest, form: ReleaseForm) -> Release | None:
    body = ReleaseCreateSerializer(data=form.api_body())
    when = ReleaseStartSerializer(data={"at": form.submitted().get("start_at")})
    # All checked before anything is made, so that every error shows at once.
    if not form.api_check(body, when):
        return None
    try:
        release = services.create_release(
            **body.release_fields(), actor=request.user.username, source="ui"
        )
    except services.Invalid as exc:
        form.add_api_errors(exc.errors)
        return None
    at = when.validated_data.get("at")
    if form.cleaned_data["start"] or at is not None:
        try:
            services.act(release.pk, "start", actor=request.user.username, source="ui", at=at)
        except services.Conflict as exc:
            messages.error(request, f"Release {release.pk} was made but not started: {exc}")
            return release
        messages.success(request, _started(release.pk, at))
    return release


def _started(release_id: int, at: datetime | None) -> str:
    if at is None:
        return f"Release {release_id} started."
    return f"Release {release_id} scheduled: it starts at {at:%Y-%m-%d %H:%M} UTC."


@role_required(VIEWER)
def release_detail(request: HttpRequest, pk: int) -> HttpResponse:
    release = get_object_or_404(Release.objects.select_related("bundle"), pk=pk)
    timeline = _timeline(release.events.all())
    asks = confirmations(release)
    return render(
        request,
        "dashboard/release_detail.html",
        {
            "release": release,
            "bundle": release.bundle,
            "steps": [
                {
                    "label": release.step_label(n),
                    "done": n < release.step,
                    "current": n == release.step,
                }
                for n in range(len(release.steps))
            ],
            "timeline": timeline,
            "insufficient_hint": repeated_hint(release),
            "actions": [(action, asks.get(action)) for action in states.ACTIONS],
            "allowed": states.allowed_actions(release.state),
            "release_json": ReleaseSerializer(release).data,
            "deliveries": WebhookDelivery.objects.filter(event__release=release).select_related(
                "webhook", "event"
            )[:100],
            "webhooks": Webhook.objects.filter(enabled=True).exists(),
            "chart": release_chart(release),
            "shadow": shadow.summary(release) if release.mirror else None,
        },
    )


def _timeline(events: QuerySet[ReleaseEvent]) -> list[ReleaseEvent]:
    """The newest events."""
    return list(events[:300])


@require_POST
@role_required(OPERATOR)
def release_action(request: HttpRequest, pk: int, action: str) -> HttpResponse:
    release = get_object_or_404(Release, pk=pk)
    if action not in states.ACTIONS:
        messages.error(request, f"No action {action!r}.")
        return redirect("dashboard:release", pk=release.pk)
    at = None
    if action == "start" and "at" in request.POST:
        at, refusal = _start_time(request)
        if refusal:
            messages.error(request, refusal)
            return redirect("dashboard:release", pk=release.pk)
    try:
        release = services.act(release.pk, action, actor=request.user.username, source="ui", at=at)
    except (services.Conflict, services.Forbidden) as exc:
        messages.error(request, str(exc))
    else:
        done = f"Release {release.pk}: {action} done, now {release.state}."
        messages.success(request, _started(release.pk, at) if at else done)
    return redirect("dashboard:release", pk=release.pk)


def _start_time(request: HttpRequest) -> tuple[datetime | None, str]:
    """The release page's "Schedule start" time, checked as the API's `start` checks `at`;
    or why it is refused."""
    when = ReleaseStartSerializer(data={"at": request.POST["at"]})
    if not when.is_valid():
        return None, "Start at: " + " ".join(when.errors["at"])
    return when.validated_data["at"], ""


@require_POST
@role_required(OPERATOR)
def bundle_create(request: HttpRequest) -> HttpResponse:
    form = BundleForm(request.POST)
    bundle = _create_bundle(request, form)
    if bundle is not None:
        messages.success(request, f"Bundle {bundle.pk} made: start it here.")
        return redirect("dashboard:bundle", pk=bundle.pk)
    return releases_page(request, ReleaseForm(), form, 400)


def _create_bundle(request: HttpRequest, form: BundleForm) -> ReleaseBundle | None:
    body = BundleCreateSerializer(data=form.api_body())
    if not form.api_check(body):
        return None
    try:
        return bundles.create_bundle(
            **body.bundle_fields(), actor=request.user.username, source="ui"
        )
    except services.Invalid as exc:
        form.add_api_errors(exc.errors)
        return None


@role_required(VIEWER)
def bundle_detail(request: HttpRequest, pk: int) -> HttpResponse:
    bundle = get_object_or_404(ReleaseBundle.objects.prefetch_related("releases"), pk=pk)
    members = bundle.members()
    first = members[0] if members else None
    timeline = _timeline(
        ReleaseEvent.objects.filter(release__bundle=bundle).select_related("release")
    )
    asks = bundle_confirmations(bundle, members)
    return render(
        request,
        "dashboard/bundle_detail.html",
        {
            "bundle": bundle,
            "plan": [first.step_label(n) for n in range(len(first.steps))] if first else [],
            "analysis": first.analysis if first else {},
            "actions": [
                (action, asks.get(action))
                for action in states.bundle_allowed_actions([m.state for m in members])
            ],
            "order_warnings": order_warnings(members, time.time()),
            "timeline": timeline,
            "bundle_json": {
                "id": bundle.pk,
                "releases": [{"id": m.pk, "state": m.state, "step": m.step} for m in members],
            },
        },
    )


@require_POST
@role_required(OPERATOR)
def bundle_action(request: HttpRequest, pk: int, action: str) -> HttpResponse:
    bundle = get_object_or_404(ReleaseBundle, pk=pk)
    if action not in states.ACTIONS:
        messages.error(request, f"No action {action!r}.")
        return redirect("dashboard:bundle", pk=bundle.pk)
    try:
        bundles.act_bundle(bundle.pk, action, actor=request.user.username, source="ui")
    except (services.Conflict, services.Forbidden) as exc:
        messages.error(request, str(exc))
    else:
        now = states.common_state(list(bundle.releases.values_list("state", flat=True)))
        messages.success(request, f"Bundle {bundle.pk}: {action} done, now {now}.")
    return redirect("dashboard:bundle", pk=bundle.pk)
