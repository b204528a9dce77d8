from typing import Any

from django.conf import settings
from django.contrib import messages
from django.core.paginator import Paginator
from django.db.models import Count, Q
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from accounts.decorators import role_required
from accounts.models import AnyUser
from accounts.roles import OPERATOR, VIEWER, has_role
from audit.filters import AuditFilter, known_actions
from audit.models import AuditEntry
from demo.restart import NotRestartable, restart_demo_instance, restartable
from gateways.models import Gateway
from gateways.views import BADGES, status_rows
from metrics.services import traffic_split
from policy.documents import policy_of
from policy.models import PolicyState, Revision
from policy.publishing import StaleRevision, load_state
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
from routing_engine import PolicyError, diff_documents, normalize_policy, rebase_policy

from .forms import PolicyForm, ServiceVersionsForm, SimulateForm


def _registry_rows(user: AnyUser) -> list[tuple[Registry, str]]:
    """Registries with their counts, each with what `user` may see of its last error."""
    registries = Registry.objects.annotate(
        service_count=Count("services", distinct=True),
        no_version_count=Count("services__instances", filter=Q(services__instances__version=None)),
    )
    return [(registry, registry.last_error_for(user)) for registry in registries]


def _with_traffic(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Service rows with their traffic split of the last 5 minutes (`split`, None without
    requests), read for all of them at once."""
    splits = traffic_split([row["name"] for row in rows])
    return [{**row, "split": splits.get(row["name"])} for row in rows]


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
            "service_count": Service.objects.count(),
            "revisions": Revision.objects.defer("content", "diff")[:5],
            "audit": AuditEntry.objects.all()[:8],
            "registries": _registry_rows(request.user),
        },
    )


@role_required(VIEWER)
def policy_editor(request: HttpRequest) -> HttpResponse:
    state = load_state()
    context: dict[str, Any] = {"state": state, "diff": None, "conflict": None}
    if request.method != "POST":
        form = PolicyForm(initial=PolicyForm.initial_from(state))
        return render(request, "dashboard/policy.html", {**context, "form": form})
    if not _can_operate(request):
        messages.error(request, "Changing the policy needs the operator role.")
        return redirect("dashboard:policy")
    form = PolicyForm(request.POST)
    if form.is_valid():
        try:
            proposed = normalize_policy(form.policy_data())
        except PolicyError as exc:
            form.add_engine_errors(exc.errors)
    if not form.is_valid():
        return render(request, "dashboard/policy.html", {**context, "form": form}, status=400)
    current = policy_of(state.document)
    if request.POST.get("action") == "save":
        try:
            result = update_policy(
                form.policy_data(),
                partial=False,
                actor=request.user.username,
                source="ui",
                expected_revision=form.cleaned_data["revision"],
                comment=form.cleaned_data["comment"],
            )
        except PolicyError as exc:
            form.add_engine_errors(exc.errors)
            return render(request, "dashboard/policy.html", {**context, "form": form}, status=400)
        except StaleRevision as exc:
            return _conflict(request, form, exc.state, proposed)
        if result.revision is None:
            messages.info(request, "Nothing changed: no new revision was published.")
            return redirect("dashboard:policy")
        messages.success(request, f"Published revision {result.revision.number}.")
        return redirect("dashboard:revision", n=result.revision.number)
    if form.cleaned_data["revision"] != state.revision:
        return _conflict(request, form, state, proposed)
    context["diff"] = diff_documents(current, proposed)
    return render(request, "dashboard/policy.html", {**context, "form": form})


def _conflict(
    request: HttpRequest, form: PolicyForm, state: PolicyState, proposed: dict[str, Any]
) -> HttpResponse:
    """Someone published first. The operator's edit is re-applied on top of the newer
    revision (a three-way merge against the revision they loaded), so neither side's change
    is lost; the diff then shows only what the operator's edit adds to the latest."""
    loaded = Revision.objects.filter(number=form.cleaned_data["revision"]).first()
    latest = policy_of(state.document)
    base = policy_of(loaded.config) if loaded else latest
    merged, clashes = rebase_policy(base, proposed, latest)
    data = PolicyForm.fields_from_policy(merged, state.revision)
    data["comment"] = form.cleaned_data["comment"]
    form = PolicyForm({k: v for k, v in data.items() if v is not False})
    if form.is_valid():
        try:
            normalize_policy(form.policy_data())
        except PolicyError as exc:
            form.add_engine_errors(exc.errors)
    context = {
        "state": state,
        "form": form,
        "conflict": state,
        "clashes": clashes,
        "diff": diff_documents(latest, merged),
    }
    return render(request, "dashboard/policy.html", context, status=409)


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
            "state": state,
        },
    )


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
    return render(
        request,
        "dashboard/service_detail.html",
        {
            "service": service,
            "row": row,
            "split": traffic_split([service.name]).get(service.name),
            "quarantines": _quarantines(service.name, row["quarantined"]),
            "form": form,
            "state": state,
            "instances": service.instances.order_by("host", "port"),
            "drain_seconds": settings.DRAIN_SECONDS,
            "lifecycle": lifecycle_timelines(service.name),
            "release_markers": {"kinds": MARKER_KINDS, "markers": chart_markers(service.name)},
            "restartable": {i.pk for i in service.instances.all() if restartable(i)},
        },
        status=status,
    )


@require_POST
@role_required(OPERATOR)
def quarantine_lift(request: HttpRequest, name: str, version: str) -> HttpResponse:
    service = get_object_or_404(Service, name=name)
    try:
        result = lift_quarantine(service.name, version, actor=request.user.username, source="ui")
    except LookupError as exc:
        messages.error(request, str(exc))
    else:
        revision = f" (revision {result.revision.number})" if result.revision else ""
        messages.success(
            request,
            f"{version} of {service.name} is out of quarantine{revision}: it gets traffic "
            "again as the policy and the lanes send it.",
        )
    return redirect("dashboard:service", name=service.name)


@role_required(VIEWER)
def revisions(request: HttpRequest) -> HttpResponse:
    load_state()
    page = Paginator(Revision.objects.defer("content"), 25).get_page(request.GET.get("page"))
    return render(request, "dashboard/revisions.html", {"page": page, "state": load_state()})


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
    result = rollback_to(target, actor=request.user.username)
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
    result = None
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        headers = {data["header_name"]: data["header_value"]} if data["header_name"] else {}
        result = simulate(
            load_state(),
            service=data["service"] or None,
            headers=headers,
            ip=data["ip"] or None,
            city=data["city"] or None,
            user=data["user"] or None,
        )
    return render(
        request,
        "dashboard/simulator.html",
        {
            "form": form,
            "result": result,
            "service_names": Service.objects.values_list("name", flat=True)[:500],
        },
    )


@require_POST
@role_required(OPERATOR)
def instance_offline(request: HttpRequest, pk: int) -> HttpResponse:
    row = get_object_or_404(Instance.objects.select_related("service"), pk=pk)
    take_offline(row.pk, actor=request.user.username, source="ui")
    messages.success(
        request, f"{row.host}:{row.port} is draining; it goes offline after the drain window."
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
