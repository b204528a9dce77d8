"""The lanes pages: every lane in the order they are tried, the lane editor (a new lane, a
lane, the gray lane's place among them) with the policy editor's preview, publish and
conflict flow (dashboard/editing.py), and a lane's deletion."""

from collections.abc import Iterable, Mapping
from typing import Any

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.dateparse import parse_datetime

from accounts.decorators import role_required
from accounts.roles import OPERATOR, VIEWER, has_role
from gateways.lane_support import LaneCarriage, lane_carriage
from policy.change_control import DraftPending, Frozen
from policy.lanes import (
    LaneInUse,
    checked_new_lane,
    gray_lane_payload,
    gray_priority_of,
    lanes_of,
    quarantined_of,
    routing_of,
)
from policy.models import PolicyState
from policy.proposals import draft_document
from policy.publishing import PublishResult, StaleRevision, load_state
from policy.services import create_lane, delete_lane, lane_rows, update_lane, with_lane
from registry_sync.models import Service
from registry_sync.services import known_versions
from routing_engine import diff_documents
from routing_engine.lanes import GRAY_LANE, empty_match, lane_order, normalize_lane

from .draft_views import notify_held
from .editing import Editor, edit
from .forms import GrayLanePlaceForm, LaneForm, NewLaneForm, PublishForm
from .pickers import pickers

NEEDS_OPERATOR = "Changing lanes needs the operator role."
# Where a new lane starts: before the gray lane (1000), as lanes for testers and features
# usually are.
NEW_LANE_PRIORITY = 100
# Entries of a rule list the lanes page shows before "and N more".
SHOWN_ENTRIES = 5
# Members of the gray lane shown (it has every service) before "and N more".
SHOWN_GRAY_MEMBERS = 20


@role_required(VIEWER)
def lanes(request: HttpRequest) -> HttpResponse:
    state = load_state()
    rows = lane_rows(state)
    for row in rows:
        if row["builtin"]:
            row["more_members"] = max(0, len(row["members"]) - SHOWN_GRAY_MEMBERS)
            row["members"] = dict(list(row["members"].items())[:SHOWN_GRAY_MEMBERS])
    known = known_versions({service for row in rows for service in row["members"]})
    quarantined = quarantined_of(state.document)
    others = {row["name"]: row for row in rows if not row["builtin"]}
    carriage = lane_carriage({name: row["members"] for name, row in others.items()})
    order = lane_order(others, gray_priority_of(state.document))
    cards = [
        {
            **row,
            "position": order.index(row["name"]) + 1 if row["name"] in order else None,
            "rules": rule_summary(row["match"]),
            "members": member_rows(row["members"].items(), known, quarantined),
            "carriage": carriage.get(row["name"]),
            "updated_at": parse_datetime(row["updated_at"] or ""),
        }
        for row in rows
    ]
    context = {"lanes": cards, "state": state, "gray_on": state.document["gray"]["enabled"]}
    return render(request, "dashboard/lanes.html", context)


def rule_summary(match: Mapping[str, Any]) -> list[tuple[str, str]]:
    """A lane's rules in words, (rule, what it takes), those that take anything."""
    rules = []
    if match["header"]["name"]:
        rules.append(("header", f"{match['header']['name']}: {match['header']['value']}"))
    for key, label in (("ips", "IPs"), ("cities", "cities"), ("users", "users")):
        entries = match[key]
        if entries:
            more = len(entries) - SHOWN_ENTRIES
            shown = ", ".join(entries[:SHOWN_ENTRIES]) + (f" and {more} more" if more > 0 else "")
            rules.append((label, shown))
    if match["percent"]:
        rules.append(("percent", f"{match['percent']} % of users"))
    return rules


def version_flag(
    service: str,
    version: str,
    known: Mapping[str, Mapping[str, int]],
    quarantined: Mapping[str, list[str]],
) -> str | None:
    """What is wrong with `version` of `service` as a lane's: quarantined (no traffic at
    all), or no instance (none routable: the lane falls back to prod there)."""
    if version in quarantined.get(service, []):
        return "quarantined"
    if not known.get(service, {}).get(version):
        return "no instance"
    return None


def member_rows(
    members: Iterable[tuple[str, Mapping[str, Any]]],
    known: Mapping[str, Mapping[str, int]],
    quarantined: Mapping[str, list[str]],
) -> list[dict[str, Any]]:
    return [
        {
            "service": service,
            **member,
            "flag": version_flag(service, member["version"], known, quarantined),
        }
        for service, member in members
    ]


# -- the editors ------------------------------------------------------------------------------


class LaneEditor(Editor[LaneForm]):
    """A lane other than gray: its place, rules and members."""

    template = "dashboard/lane.html"
    form_class = LaneForm
    needs_operator = NEEDS_OPERATOR
    shows_proposal = True

    def __init__(self, name: str) -> None:
        self.name = name

    def url(self) -> str:
        return reverse("dashboard:lane-edit", args=[self.name])

    def gone_url(self) -> str:
        return reverse("dashboard:lanes")

    def missing(self, document: dict[str, Any]) -> str | None:
        return None if self.name in lanes_of(document) else f"There is no lane {self.name}."

    def current(self, document: dict[str, Any]) -> dict[str, Any] | None:
        lane = lanes_of(document).get(self.name)
        return None if lane is None else routing_of(lane)

    def fields(self, value: dict[str, Any], revision: int) -> dict[str, Any]:
        # A member the edit removed is None after the merge of a conflict.
        members = {service: m for service, m in value["members"].items() if m is not None}
        return LaneForm.fields_from_lane({**value, "members": members}, revision)

    def propose(self, form: LaneForm, document: dict[str, Any]) -> dict[str, Any]:
        return normalize_lane(form.lane_data())

    def draft(self, proposed: dict[str, Any], document: dict[str, Any]) -> dict[str, Any]:
        return draft_document(document, lanes=[{"name": self.name, **proposed}])

    def publish(self, form: LaneForm, actor: str) -> PublishResult:
        return update_lane(
            self.name,
            form.lane_data(),
            partial=False,
            actor=actor,
            source="ui",
            expected_revision=form.cleaned_data["revision"],
            comment=form.cleaned_data["comment"],
        )

    def context(self, state: PolicyState, form: LaneForm) -> dict[str, Any]:
        lane = lanes_of(state.document)[self.name]
        return {
            "lane_name": self.name,
            "updated_by": lane.get("updated_by", ""),
            "updated_at": parse_datetime(lane.get("updated_at", "")),
            **_pickers(state, form, self.name),
        }


class NewLaneEditor(Editor[NewLaneForm]):
    template = "dashboard/lane.html"
    form_class = NewLaneForm
    needs_operator = NEEDS_OPERATOR
    shows_proposal = True

    def url(self) -> str:
        return reverse("dashboard:lane-create")

    def current(self, document: dict[str, Any]) -> None:
        return None

    def initial(self, document: dict[str, Any]) -> dict[str, Any]:
        return {"name": "", "priority": NEW_LANE_PRIORITY, "enabled": True,
                "match": empty_match(), "members": {}}  # fmt: skip

    def fields(self, value: dict[str, Any], revision: int) -> dict[str, Any]:
        return {"name": value["name"], **LaneForm.fields_from_lane(value, revision)}

    def propose(self, form: NewLaneForm, document: dict[str, Any]) -> dict[str, Any]:
        name = form.submitted().get("name")
        return {"name": name, **checked_new_lane(name, form.lane_data(), lanes_of(document))}

    def draft(self, proposed: dict[str, Any], document: dict[str, Any]) -> dict[str, Any]:
        return draft_document(document, lanes=[proposed])

    def publish(self, form: NewLaneForm, actor: str) -> PublishResult:
        return create_lane(
            form.cleaned_data["name"],
            form.lane_data(),
            actor=actor,
            source="ui",
            expected_revision=form.cleaned_data["revision"],
            comment=form.cleaned_data["comment"],
        )

    def context(self, state: PolicyState, form: NewLaneForm) -> dict[str, Any]:
        return _pickers(state, form, None)


class GrayLaneEditor(Editor[GrayLanePlaceForm]):
    """The gray lane's place among the lanes. Its rules are the policy's (the policy
    editor) and its members the services' gray versions (each service's page)."""

    template = "dashboard/lane_gray.html"
    form_class = GrayLanePlaceForm
    needs_operator = NEEDS_OPERATOR

    def url(self) -> str:
        return reverse("dashboard:lane-edit", args=[GRAY_LANE])

    def current(self, document: dict[str, Any]) -> dict[str, Any]:
        return {"priority": gray_priority_of(document)}

    def fields(self, value: dict[str, Any], revision: int) -> dict[str, Any]:
        return GrayLanePlaceForm.fields_from_place(value, revision)

    def propose(self, form: GrayLanePlaceForm, document: dict[str, Any]) -> dict[str, Any]:
        priority = form.submitted().get("priority")
        return {"priority": normalize_lane({"priority": priority})["priority"]}

    def draft(self, proposed: dict[str, Any], document: dict[str, Any]) -> dict[str, Any]:
        return with_lane(document, GRAY_LANE, proposed, partial=True, actor="")

    def publish(self, form: GrayLanePlaceForm, actor: str) -> PublishResult:
        return update_lane(
            GRAY_LANE,
            {"priority": form.cleaned_data["priority"]},
            partial=True,
            actor=actor,
            source="ui",
            expected_revision=form.cleaned_data["revision"],
            comment=form.cleaned_data["comment"],
        )

    def context(self, state: PolicyState, form: GrayLanePlaceForm) -> dict[str, Any]:
        services = list(Service.objects.values_list("name", flat=True))
        lane = gray_lane_payload(state.document, services, "", "")
        members = list(lane["members"].items())
        shown = dict(members[:SHOWN_GRAY_MEMBERS])
        known = known_versions(shown)
        return {
            "rules": rule_summary(lane["match"]),
            "members": member_rows(shown.items(), known, quarantined_of(state.document)),
            "more_members": len(members) - len(shown),
            "gray_on": lane["enabled"],
        }


def _pickers(state: PolicyState, form: LaneForm, lane: str | None) -> dict[str, Any]:
    """The member rows' pickers (the services and versions the registries know), what is
    wrong with each row's version, and which gateways cannot carry the lane."""
    chosen = [
        (row, (row["service"].value() or "").strip(), (row["version"].value() or "").strip())
        for row in form.members
    ]
    members = {service for _, service, _ in chosen if service}
    offered = pickers(members)
    form.use_pickers(offered)
    quarantined = quarantined_of(state.document)
    return {
        "pickers": offered,
        "member_rows": [
            (row, version_flag(service, version, offered.known, quarantined) if version else None)
            for row, service, version in chosen
        ],
        "carriage": lane_carriage({lane: members})[lane] if lane else LaneCarriage(),
    }


@role_required(VIEWER)
def lane_create(request: HttpRequest) -> HttpResponse:
    return edit(request, NewLaneEditor())


@role_required(VIEWER)
def lane_edit(request: HttpRequest, name: str) -> HttpResponse:
    editor: Editor[Any] = GrayLaneEditor() if name == GRAY_LANE else LaneEditor(name)
    return edit(request, editor)


@role_required(VIEWER)
def lane_delete(request: HttpRequest, name: str) -> HttpResponse:
    """The deletion as a preview (the lane's fields, all removed) and its publishing, with
    the revision the page showed as If-Match."""
    state = load_state()
    if name == GRAY_LANE or name not in lanes_of(state.document):
        raise Http404(f"There is no lane {name} to delete.")
    form = PublishForm(initial={"revision": state.revision})
    conflict, status = None, 200
    if request.method == "POST":
        if not has_role(request.user, OPERATOR):
            messages.error(request, NEEDS_OPERATOR)
            return redirect("dashboard:lane-delete", name=name)
        form = PublishForm(request.POST)
        if form.is_valid():
            try:
                result = delete_lane(
                    name,
                    actor=request.user.username,
                    source="ui",
                    expected_revision=form.cleaned_data["revision"],
                    comment=form.cleaned_data["comment"],
                )
            except StaleRevision as exc:
                conflict = state = exc.state
                if name not in lanes_of(state.document):
                    messages.info(request, f"Lane {name} was deleted meanwhile.")
                    return redirect("dashboard:lanes")
                form, status = PublishForm(initial={"revision": state.revision}), 409
            except (LaneInUse, Frozen) as exc:
                messages.error(request, str(exc))
                status = 409
            except DraftPending as exc:
                notify_held(request, exc)
                return redirect("dashboard:lanes")
            else:
                assert result.revision is not None, "deleting a lane always changes something"
                messages.success(request, f"Published revision {result.revision.number}.")
                return redirect("dashboard:revision", n=result.revision.number)
        else:
            status = 400
    lane = routing_of(lanes_of(state.document)[name])
    context = {
        "state": state,
        "form": form,
        "lane_name": name,
        "conflict": conflict,
        "diff": diff_documents(lane, {}),
    }
    return render(request, "dashboard/lane_delete.html", context, status=status)
