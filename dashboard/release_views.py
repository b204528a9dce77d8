"""The releases pages: the list with a "start a release" form, a release's steps, timeline,
webhook deliveries and the operator's actions. The same use cases as the API
(rollouts.services), validated by the API's serializer."""

from django.contrib import messages
from django.core.paginator import Paginator
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from accounts.decorators import role_required
from accounts.roles import OPERATOR, VIEWER, has_role
from registry_sync.models import Service
from rollouts import services, states
from rollouts.filters import ReleaseFilter
from rollouts.models import Release, Webhook, WebhookDelivery
from rollouts.serializers import ReleaseCreateSerializer, ReleaseSerializer

from .forms import ReleaseForm


@role_required(VIEWER)
def releases(request):
    form = ReleaseForm(initial={"service": request.GET.get("service", "")})
    status = 200
    if request.method == "POST":
        if not has_role(request.user, OPERATOR):
            messages.error(request, "Starting a release needs the operator role.")
            return redirect("dashboard:releases")
        form = ReleaseForm(request.POST)
        release = _create(request, form) if form.is_valid() else None
        if release is not None:
            return redirect("dashboard:release", pk=release.pk)
        status = 400
    listed = ReleaseFilter(request.GET, queryset=Release.objects.all())
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
            "states": states.STATES,
            "service_names": Service.objects.order_by("name").values_list("name", flat=True)[:500],
        },
        status=status,
    )


def _create(request, form: ReleaseForm) -> Release | None:
    body = ReleaseCreateSerializer(data=form.api_body())
    if not body.is_valid():
        form.add_api_errors(body.errors)
        return None
    try:
        release = services.create_release(
            **body.release_fields(), actor=request.user.username, source="ui"
        )
    except services.Invalid as exc:
        form.add_api_errors(exc.errors)
        return None
    if form.cleaned_data["start"]:
        try:
            services.act(release.pk, "start", actor=request.user.username, source="ui")
        except services.Conflict as exc:
            messages.error(request, f"Release {release.pk} was made but not started: {exc}")
            return release
        messages.success(request, f"Release {release.pk} started.")
    return release


@role_required(VIEWER)
def release_detail(request, pk):
    release = get_object_or_404(Release, pk=pk)
    timeline = list(release.events.all()[:300])
    for event in timeline:
        event.why = event.detail.get("reason") or event.detail.get("routing") or ""
    return render(
        request,
        "dashboard/release_detail.html",
        {
            "release": release,
            "steps": [
                {
                    "label": release.step_label(n),
                    "done": n < release.step,
                    "current": n == release.step,
                }
                for n in range(len(release.steps))
            ],
            "timeline": timeline,
            "actions": list(states.ACTIONS),
            "allowed": states.allowed_actions(release.state),
            "release_json": ReleaseSerializer(release).data,
            "deliveries": WebhookDelivery.objects.filter(event__release=release).select_related(
                "webhook", "event"
            )[:100],
            "webhooks": Webhook.objects.filter(enabled=True).exists(),
        },
    )


@require_POST
@role_required(OPERATOR)
def release_action(request, pk, action):
    release = get_object_or_404(Release, pk=pk)
    if action not in states.ACTIONS:
        messages.error(request, f"No action {action!r}.")
        return redirect("dashboard:release", pk=release.pk)
    try:
        release = services.act(release.pk, action, actor=request.user.username, source="ui")
    except services.Conflict as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Release {release.pk}: {action} done, now {release.state}.")
    return redirect("dashboard:release", pk=release.pk)
