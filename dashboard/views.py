from typing import Any

from django.conf import settings
from django.contrib import messages
from django.core.paginator import Paginator
from django.db.models import Count, Q
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.views.decorators.http import require_POST

from accounts.decorators import role_required
from accounts.models import AnyUser
from accounts.roles import ADMIN, OPERATOR, VIEWER, has_role
from audit.filters import AuditFilter, known_actions
from audit.models import AuditEntry
from demo.restart import NotRestartable, restart_demo_instance, restartable
from gateways.generation import newest_number, revision_of
from gateways.models import Gateway
from gateways.views import BADGES, status_rows
from metrics.services import InstanceTraffic, instance_traffic, traffic_split
from policy.change_control import DraftPending, Frozen, set_protected
from policy.documents import policy_of
from policy.lanes import LaneInUse, gray_priority_of
from policy.models import PolicyState, Revision
from policy.proposals import draft_document
from policy.publishing import PublishResult, load_state
from policy.services import (
    lift_quarantine,
    rollback_to,
    service_rows,
    set_service_versions,
    update_policy,
)
from policy.simulation import simulate
from registry_sync.models import Instance, Registry, Service
from registry_sync.services import bring_online, lifecycle_timelines, take_offline
from releases import states
from releases.models import Release
from releases.services import MARKER_KINDS, chart_markers
from routing_engine import ALL, PROD, PolicyError, normalize_policy
from routing_engine.lanes import GRAY_LANE

from .attention import needs_action
from .draft_views import notify_held
from .editing import Editor, edit
from .forms import PolicyForm, ServiceVersionsForm, SimulateForm
from .graph_views import current_drawing
from .minute_health import MIN_REQUESTS, WORSE_POINTS, minute_health
from .pickers import pickers


def _registry_rows(user: AnyUser) -> list[tuple[Registry, str]]:
    """Registries with their counts, each with what `user` may see of its last error."""
    registries = Registry.objects.annotate(
        service_count=Count("services", distinct=True),
        no_version_count=Count("services__instances", filter=Q(services__instances__version=None)),
    )
    return [(registry, registry.last_error_for(user)) for registry in registries]


def _with_traffic(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Service rows with their traffic split of the last 5 minutes (`split`, None without
    requests) and their versions' last minute (`minute`), read for all of them at once."""
    splits = traffic_split([row["name"] for row in rows])
    health = minute_health(rows)
    return [
        {**row, "split": splits.get(row["name"]), "minute": health[row["name"]]} for row in rows
    ]


def _quarantines(service: str, versions: list[str]) -> list[tuple[str, Release | None]]:
    """Each quarantined version of the service with the release whose rollback quarantined
    it: the latest of that version rolled back (None if there is none)."""
    rolled_back = {
        release.to_version: release
        for release in Release.objects.filter(
            service=service, to_version__in=versions, state=states.ROLLED_BACK
        ).order_by("created_at", "id")  # the latest last, so it stays
    }
    return [(version, rolled_back.get(version)) for version in versions]


@role_required(VIEWER)
def overview(request: HttpRequest) -> HttpResponse:
    state = load_state()
    services = list(Service.objects.select_related("registry").order_by("name")[:50])
    generation, gateways = status_rows(Gateway.objects.all()[:20])
    return render(
        request,
        "dashboard/overview.html",
        {
            "gateways": gateways,
            "gateway_count": Gateway.objects.count(),
            "generation": generation,
            "badges": BADGES,
            "state": state,
            "policy": policy_of(state.document),
            "services": _with_traffic(service_rows(services, state.document)),
            "min_requests": MIN_REQUESTS,
            "worse_points": WORSE_POINTS,
            "needs_action": needs_action(state.document),
            "service_count": Service.objects.count(),
            "revisions": Revision.objects.defer("content", "diff")[:5],
            "audit": AuditEntry.objects.all()[:8],
            "registries": _registry_rows(request.user),
            "service_graph": current_drawing(),
        },
    )


@role_required(VIEWER)
def needs_action_badges(request: HttpRequest) -> HttpResponse:
    """The overview's badges alone, for its live updates."""
    context = {"needs_action": needs_action(load_state().document)}
    return render(request, "dashboard/_needs_action.html", context)


class PolicyEditor(Editor[PolicyForm]):
    template = "dashboard/policy.html"
    form_class = PolicyForm
    needs_operator = "Changing the policy needs the operator role."

    def url(self) -> str:
        return reverse("dashboard:policy")

    def current(self, document: dict[str, Any]) -> dict[str, Any]:
        return policy_of(document)

    def fields(self, value: dict[str, Any], revision: int) -> dict[str, Any]:
        return PolicyForm.fields_from_policy(value, revision)

    def propose(self, form: PolicyForm, document: dict[str, Any]) -> dict[str, Any]:
        return normalize_policy(form.policy_data())

    def context(self, state: PolicyState, form: PolicyForm) -> dict[str, Any]:
        return {"gray_priority": gray_priority_of(state.document), "pickers": pickers()}

    def draft(self, proposed: dict[str, Any], document: dict[str, Any]) -> dict[str, Any]:
        return draft_document(document, policy=proposed)

    def publish(self, form: PolicyForm, actor: str) -> PublishResult:
        return update_policy(
            form.policy_data(),
            partial=False,
            actor=actor,
            source="ui",
            expected_revision=form.cleaned_data["revision"],
            comment=form.cleaned_data["comment"],
        )


@role_required(VIEWER)
def policy_editor(request: HttpRequest) -> HttpResponse:
    return edit(request, PolicyEditor())


def _can_operate(request: HttpRequest) -> bool:
    return has_role(request.user, OPERATOR)


@role_required(VIEWER)
def services(request: HttpRequest) -> HttpResponse:
    state = load_state()
    page = Paginator(Service.objects.select_related("registry").order_by("name"), 50).get_page(
        request.GET.get("page")
    )
    return render(
        request,
        "dashboard/services.html",
        {
            "page": page,
            "services": _with_traffic(service_rows(list(page), state.document)),
            "min_requests": MIN_REQUESTS,
            "state": state,
        },
    )


def _with_instance_traffic(service: Service) -> list[tuple[Instance, InstanceTraffic | None]]:
    """The service's instances, each with its traffic of the last minute (None: no gateway
    told of requests it answered)."""
    traffic = instance_traffic(service.name)
    return [
        (instance, traffic.get(f"{instance.host}:{instance.port}"))
        for instance in service.instances.order_by("host", "port")
    ]


@role_required(VIEWER)
def service_detail(request: HttpRequest, name: str) -> HttpResponse:
    service = get_object_or_404(Service.objects.select_related("registry"), name=name)
    state = load_state()
    row = service_rows([service], state.document)[0]
    form = ServiceVersionsForm(
        initial={
            "prod_version": row["override"].get("prod", ""),
            "gray_version": row["override"].get("gray", ""),
        }
    )
    status = 200
    if request.method == "POST":
        if not _can_operate(request):
            messages.error(request, "Changing versions needs the operator role.")
            return redirect("dashboard:service", name=name)
        form = ServiceVersionsForm(request.POST)
        if form.is_valid():
            try:
                result = set_service_versions(
                    service.name, form.changes(), actor=request.user.username, source="ui"
                )
            except PolicyError as exc:
                for field, errors in exc.errors.items():
                    for error in errors:
                        form.add_error(field if field in form.fields else None, error)
                status = 400
            except Frozen as exc:
                form.add_error(None, str(exc))
                status = 409
            except DraftPending as exc:
                notify_held(request, exc)
                return redirect("dashboard:service", name=name)
            else:
                if result.revision is not None:
                    messages.success(
                        request,
                        f"Versions of {service.name} saved as revision {result.revision.number}.",
                    )
                else:
                    messages.info(request, "Nothing changed.")
                return redirect("dashboard:service", name=name)
        else:
            status = 400
    offered = pickers([service.name])
    offered.versions_of(service.name, form["prod_version"], form["gray_version"])
    return render(
        request,
        "dashboard/service_detail.html",
        {
            "pickers": offered,
            "service": service,
            "row": row,
            "split": traffic_split([service.name]).get(service.name),
            "quarantines": _quarantines(service.name, row["quarantined"]),
            "form": form,
            "state": state,
            "instances": _with_instance_traffic(service),
            "drain_seconds": settings.DRAIN_SECONDS,
            "lifecycle": lifecycle_timelines(service.name),
            "release_markers": {"kinds": MARKER_KINDS, "markers": chart_markers(service.name)},
            "restartable": {i.pk for i in service.instances.all() if restartable(i)},
        },
        status=status,
    )


@role_required(VIEWER)
def service_instance_traffic(request: HttpRequest, name: str) -> JsonResponse:
    """The instance table's traffic cells, as the page renders them, by instance id: for
    its live updates."""
    service = get_object_or_404(Service, name=name)
    cells = {
        str(instance.pk): render_to_string(
            "dashboard/_instance_traffic.html", {"traffic": traffic}, request
        )
        for instance, traffic in _with_instance_traffic(service)
    }
    return JsonResponse({"cells": cells})


@role_required(VIEWER)
def service_lifecycle(request: HttpRequest, name: str) -> HttpResponse:
    """The service page's lifecycle timeline alone, for its live updates."""
    service = get_object_or_404(Service, name=name)
    context = {"service": service, "lifecycle": lifecycle_timelines(service.name)}
    return render(request, "dashboard/_lifecycle.html", context)


@require_POST
@role_required(OPERATOR)
def quarantine_lift(request: HttpRequest, name: str, version: str) -> HttpResponse:
    service = get_object_or_404(Service, name=name)
    try:
        result = lift_quarantine(service.name, version, actor=request.user.username, source="ui")
    except (LookupError, Frozen) as exc:
        messages.error(request, str(exc))
    except DraftPending as exc:
        notify_held(request, exc)
    else:
        revision = f" (revision {result.revision.number})" if result.revision else ""
        messages.success(
            request,
            f"{version} of {service.name} is out of quarantine{revision}: it gets traffic "
            "again as the policy and the lanes send it.",
        )
    return redirect("dashboard:service", name=service.name)


@require_POST
@role_required(ADMIN)
def service_protect(request: HttpRequest, name: str) -> HttpResponse:
    """Protect the service (its routing changes wait as drafts for another operator) or lift
    that, as `PATCH /api/v1/services/{name}/` with `protected` does."""
    service = get_object_or_404(Service, name=name)
    protected = request.POST.get("protected") == "true"
    set_protected(service, protected, actor=request.user.username, source="ui")
    if protected:
        messages.success(
            request,
            f"{service.name} is protected: its policy and lane changes wait as drafts for "
            "another operator's approval.",
        )
    else:
        messages.success(request, f"{service.name} is no longer protected.")
    return redirect("dashboard:service", name=service.name)


@role_required(VIEWER)
def revisions(request: HttpRequest) -> HttpResponse:
    load_state()
    page = Paginator(Revision.objects.defer("content"), 25).get_page(request.GET.get("page"))
    current = newest_number()
    context = {
        "page": page,
        "state": load_state(),
        "generation": current,
        "generation_revision": revision_of(current),
    }
    return render(request, "dashboard/revisions.html", context)


@role_required(VIEWER)
def revision_detail(request: HttpRequest, n: int) -> HttpResponse:
    load_state()
    revision = get_object_or_404(Revision, number=n)
    return render(
        request,
        "dashboard/revision_detail.html",
        {"revision": revision, "state": load_state()},
    )


@require_POST
@role_required(OPERATOR)
def rollback(request: HttpRequest, n: int) -> HttpResponse:
    target = get_object_or_404(Revision, number=n)
    try:
        result = rollback_to(target, actor=request.user.username)
    except (LaneInUse, Frozen) as exc:
        messages.error(request, str(exc))
        return redirect("dashboard:revision", n=n)
    except DraftPending as exc:
        notify_held(request, exc)
        return redirect("dashboard:revision", n=n)
    if result.revision is not None:
        messages.success(
            request,
            f"Rolled back: revision {result.revision.number} has the content of revision {n}.",
        )
        return redirect("dashboard:revision", n=result.revision.number)
    messages.info(request, f"Revision {n}'s content is already live.")
    return redirect("dashboard:revision", n=n)


@role_required(VIEWER)
def audit(request: HttpRequest) -> HttpResponse:
    """The audit log, filtered like `GET /api/v1/audit/` (one FilterSet serves both)."""
    entries = AuditFilter(request.GET, queryset=AuditEntry.objects.all())
    page = Paginator(entries.qs, 50).get_page(request.GET.get("page"))
    return render(
        request,
        "dashboard/audit.html",
        {
            "page": page,
            "actor": request.GET.get("actor", "").strip(),
            "action": request.GET.get("action", "").strip(),
            "actions": known_actions(),
        },
    )


@role_required(VIEWER)
def simulator(request: HttpRequest) -> HttpResponse:
    form = SimulateForm(request.POST or None)
    result, hops = None, []
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        headers = {data["header_name"]: data["header_value"]} if data["header_name"] else {}
        result = simulate(
            load_state(),
            service=None,
            path=data["path"] or None,
            headers=headers,
            ip=data["ip"] or None,
            city=data["city"] or None,
            user=data["user"] or None,
        )
        hops = [(hop, hop_reason(result, hop)) for hop in result.get("hops", [])]
    return render(
        request,
        "dashboard/simulator.html",
        {
            "form": form,
            "result": result,
            "hops": hops,
            "pickers": pickers(),
        },
    )


def hop_reason(result: dict[str, Any], hop: dict[str, Any]) -> str:
    """Why a simulated request gets `hop`'s version there (docs/gateway-protocol.md, "Per
    hop"), in words."""
    asked, lane = hop["asked"], result["lane"]
    if asked is None and result["flag"] == ALL:
        reason = "any version"
    elif asked is None:
        reason = "any version: version-aware balancing is off"
    elif hop["fallback"]:
        reason = f"no routable instance of {asked}: prod {hop['version']} instead"
    elif result["flag"] == PROD:
        reason = "prod version"
    elif lane == GRAY_LANE:
        reason = f"gray version {asked}"
    elif hop["in_lane"]:
        reason = f"member version {asked}"
    else:
        reason = f"not a member of {lane}: prod {asked}"
    if not hop["routable"]:
        reason += "; no routable instance: the gateway answers 503"
    return reason


@require_POST
@role_required(OPERATOR)
def instance_offline(request: HttpRequest, pk: int) -> HttpResponse:
    row = get_object_or_404(Instance.objects.select_related("service"), pk=pk)
    take_offline(row.pk, actor=request.user.username, source="ui")
    # The service page rewrites this message (by its data-about) when the instance is OFFLINE.
    messages.success(
        request,
        f"{row.host}:{row.port} is draining; it goes offline after the drain window.",
        extra_tags=f"draining-{row.pk}",
    )
    return redirect("dashboard:service", name=row.service.name)


@require_POST
@role_required(OPERATOR)
def instance_restart(request: HttpRequest, pk: int) -> HttpResponse:
    row = get_object_or_404(Instance.objects.select_related("service"), pk=pk)
    try:
        pid = restart_demo_instance(row, actor=request.user.username)
    except NotRestartable as exc:
        messages.error(request, str(exc))
    else:
        messages.success(
            request,
            f"{row.host}:{row.port} (pid {pid}) got SIGTERM: it drains, exits, and the demo "
            "fleet starts it again. Watch its lifecycle below.",
        )
    return redirect("dashboard:service", name=row.service.name)


@require_POST
@role_required(OPERATOR)
def instance_online(request: HttpRequest, pk: int) -> HttpResponse:
    row = get_object_or_404(Instance.objects.select_related("service"), pk=pk)
    bring_online(row.pk, actor=request.user.username, source="ui")
    messages.success(request, f"{row.host}:{row.port} is back in traffic.")
    return redirect("dashboard:service", name=row.service.name)
