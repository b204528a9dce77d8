"""Use cases of releases, shared by the API, the pages and the beat job: create, the
operator's actions, and the analysis of each interval. Every routing change a release makes
goes through policy.release_routing (a revision and an audit entry each); every action and
decision is an event on the release's timeline, published live."""

import time
from datetime import datetime, timedelta
from typing import cast

from django.db import IntegrityError, transaction
from django.dispatch import Signal
from django.utils import timezone

import events
from audit import log as audit_log
from gateways.fronting import analysis_standing
from metrics.samples import Figures
from metrics.services import window_figures
from policy import release_routing
from policy.documents import effective_versions
from policy.freezes import active_freeze, describe
from policy.lanes import lanes_of, quarantined_of
from policy.publishing import load_state
from registry_sync.models import Service
from releases import analysis, approvals, convergence, promql_checks, states
from releases.models import Release, ReleaseBundle, ReleaseEvent
from releases.serializers import ReleaseEventSerializer, ReleaseSerializer
from releases.versions import unregistered_problem
from routing_engine.lanes import GRAY_LANE

# Samples of second t reach the dashboard a second or two later (the gateways report once a
# second): a window is analysed only once its last second is this old.
REPORT_LAG_SECONDS = 2
# Who the audit log and the revisions name for the analysis' own decisions.
ANALYSIS_ACTOR = "release-analysis"


# Sent after commit with `event` (a ReleaseEvent) when people may want to hear of it; the
# webhooks listen (releases/apps.py).
release_event = Signal()


class Conflict(Exception):
    """The release's state (or another release of its service) does not allow this: 409."""


class Forbidden(Exception):
    """The release allows this, but not to this person (four eyes): 403."""


class Invalid(Exception):
    """Bad input, DRF style: field -> messages (400)."""

    def __init__(self, errors: dict[str, list[str]]):
        super().__init__(errors)
        self.errors = errors


def create_release(
    *,
    service: str,
    to_version: str,
    from_version: str | None,
    steps: list[dict],
    analysis_settings: dict,
    actor: str,
    source: str,
    lane: str = GRAY_LANE,
    bundle: ReleaseBundle | None = None,
    position: int = 0,
    mirror: dict | None = None,
) -> Release:
    """A pending release in `lane` (an existing one); `from_version` defaults to the
    service's prod version."""
    errors: dict[str, list[str]] = {}
    if not Service.objects.filter(name=service).exists():
        errors["service"] = [f"No service named {service!r}."]
    document = load_state().document
    if lane != GRAY_LANE and lane not in lanes_of(document):
        errors["lane"] = [f"No lane named {lane!r}."]
    prod, _ = effective_versions(document, service)
    from_version = from_version or prod
    if from_version == to_version:
        errors["to_version"] = [f"Must differ from the prod version ({from_version})."]
    elif "service" not in errors and (problem := unregistered_problem(service, to_version)):
        errors["to_version"] = [problem]
    if errors:
        raise Invalid(errors)
    with transaction.atomic():
        release = Release.objects.create(
            service=service,
            from_version=from_version,
            to_version=to_version,
            lane=lane,
            steps=steps,
            analysis=analysis_settings,
            created_by=actor,
            bundle=bundle,
            position=position,
            mirror=mirror,
        )
        _audit(release, actor, source, "release.create", None, _audit_view(release))
        _event(release, "created", {"steps": steps, "analysis": analysis_settings}, actor)
    return release


def lane_in_use(lane: str) -> str | None:
    """Why `lane` may not be removed from the live document: an active release routes in it
    (a guard of policy.lanes, registered in releases/apps.py)."""
    release = Release.objects.filter(lane=lane, state__in=states.ACTIVE).order_by("pk").first()
    if release is None:
        return None
    return (
        f"Release {release.pk} of {release.service} {release.to_version} is {release.state} "
        f"in lane {lane}: finish or abort it first."
    )


def act(
    release_id: int, action: str, *, actor: str, source: str, at: datetime | None = None
) -> Release:
    """start, pause, resume, promote, approve, rollback or abort; Conflict when the state
    forbids it. `start` `at` a time schedules it instead (releases/schedules.py starts it)."""
    with transaction.atomic():
        release = Release.objects.select_for_update().get(pk=release_id)
        if release.state not in states.ACTIONS[action]:
            raise Conflict(
                f"A release that is {release.state} cannot {action}; allowed: "
                + (", ".join(states.allowed_actions(release.state)) or "nothing")
                + "."
            )
        if action == "promote" and release.is_approval_step():
            raise Conflict(f"Step {release.step + 1} waits for an approval: resume, then approve.")
        if action in ("promote", "approve"):
            _refuse_if_frozen(release)
        before = _audit_view(release)
        if action == "start" and at is not None:
            _schedule(release, at, actor)
        else:
            _ACTIONS[action](release, actor, source)
        _audit(release, actor, source, f"release.{action}", before, _audit_view(release))
    return release


def note(release: Release, kind: str, detail: dict, actor: str) -> ReleaseEvent:
    """An event on a release's timeline that changes nothing else (a held scheduled start)."""
    return _event(release, kind, detail, actor)


def _schedule(release: Release, at: datetime, actor: str) -> None:
    release.state = states.SCHEDULED
    release.scheduled_at = at
    release.save()
    _event(
        release,
        "scheduled",
        {"at": at.isoformat(), "reason": f"starts at {at:%Y-%m-%d %H:%M:%S} UTC"},
        actor,
    )


def _start(release: Release, actor: str, source: str) -> None:
    document = load_state().document
    gray = document["gray"]
    if not (gray["enabled"] and gray["routing"]):
        raise Conflict("Gray routing is off (policy `enabled` and `routing`): turn it on first.")
    if release.to_version in quarantined_of(document).get(release.service, []):
        raise Conflict(
            f"{release.to_version} of {release.service} is quarantined (a release of it was "
            "rolled back): lift the quarantine first."
        )
    _refuse_if_frozen(release)
    under_way = f"Another release of {release.service} in lane {release.lane} is under way."
    active = Release.objects.filter(service=release.service, state__in=states.ACTIVE)
    if active.filter(lane=release.lane).exists():
        raise Conflict(under_way)
    # Releases of one service in other lanes share its prod version: this one may not change it.
    other = active.exclude(from_version=release.from_version).first()
    if other is not None:
        raise Conflict(
            f"Release {other.pk} of {release.service} (lane {other.lane}) runs over prod "
            f"{other.from_version}; this one's from_version {release.from_version} would "
            "change it."
        )
    release.state = states.RUNNING
    release.step = 0
    release.failures = 0
    release.figures = {}
    _new_step_clock(release)
    try:
        with transaction.atomic():
            release.save()
    except IntegrityError:
        raise Conflict(under_way) from None
    # A first step that is an approval routes nothing yet.
    waits = release.is_approval_step()
    release.routing_before = _routing_found(release) if waits else _route_step(release, actor)
    release.save(update_fields=["routing_before"])
    if waits:
        _event(release, "started", {"routing": release.step_label()}, actor)
        _await_approval(release, actor)
    else:
        _step_routed(release, "started", {"routing": release.step_label()}, actor)


def _refuse_if_frozen(release: Release) -> None:
    """No release starts or advances inside a freeze window of its service."""
    freeze = active_freeze(release.service)
    if freeze is not None:
        raise Conflict(f"{release.service} is frozen by {describe(freeze)}.")


def _pause(release: Release, actor: str, source: str) -> None:
    release.state = states.PAUSED
    release.save()
    _event(release, "paused", {}, actor)


def _resume(release: Release, actor: str, source: str) -> None:
    release.state = states.AWAITING_APPROVAL if release.is_approval_step() else states.RUNNING
    _new_step_clock(release)  # the paused time counts neither as data nor against the deadline
    convergence.wait_again(release, time.time())
    release.save()
    _event(release, "resumed", {}, actor)


def _promote(
    release: Release,
    actor: str,
    source: str,
    detail: dict | None = None,
    window_start: int | None = None,
) -> None:
    release.ready_at_step = None
    _write(release, convergence.flush(release, time.time()))
    if release.step + 1 < len(release.steps):
        release.step += 1
        if release.is_approval_step():
            _await_approval(release, actor)
            return
        release.state = states.RUNNING
        _new_step_clock(release, window_start)
        release.save()
        _route_step(release, actor)
        _step_routed(
            release, "advanced", {**(detail or {}), "routing": release.step_label()}, actor
        )
        return
    release.state = states.PROMOTED
    release.save()
    release_routing.promote(
        release.service,
        release.lane,
        _routing_before(release),
        to_version=release.to_version,
        actor=actor,
        comment=_comment(release, f"{release.to_version} is prod"),
    )
    _event(release, "promoted", {**(detail or {}), "prod_version": release.to_version}, actor)


def _await_approval(release: Release, actor: str) -> None:
    """At an approval step: the routing stays that of the step before, nothing is analysed."""
    release.state = states.AWAITING_APPROVAL
    release.save()
    _event(release, "awaiting_approval", {"reason": approvals.waiting_reason(release)}, actor)


def _approve(release: Release, actor: str, source: str) -> None:
    if refusal := approvals.refusal(release, actor):
        raise Forbidden(refusal)
    _event(release, "approved", {"approved_by": actor, "reason": f"approved by {actor}"}, actor)
    _promote(release, actor, source)


def _finish_back_to_prod(
    release: Release, state: str, kind: str, actor: str, source: str, detail: dict
) -> None:
    """The routing as it was before the release started; after a rollback its version is
    quarantined as well (no traffic at all until an operator lifts it)."""
    was_active = release.state in states.ACTIVE
    _write(release, convergence.flush(release, time.time()))
    release.state = state
    release.save()
    quarantine = release.to_version if state == states.ROLLED_BACK and was_active else None
    if was_active:
        what = f"{kind}: routing as before the release"
        release_routing.restore(
            release.service,
            release.lane,
            _routing_before(release),
            from_version=release.from_version,
            quarantine=quarantine,
            actor=actor,
            comment=_comment(release, what + (f", {quarantine} quarantined" if quarantine else "")),
        )
    if quarantine:
        detail = {**detail, "quarantined": quarantine}
    _event(release, kind, {**detail, "prod_version": release.from_version}, actor)


def _rollback(release: Release, actor: str, source: str, detail: dict | None = None) -> None:
    _finish_back_to_prod(release, states.ROLLED_BACK, "rolled_back", actor, source, detail or {})


def _abort(release: Release, actor: str, source: str) -> None:
    _finish_back_to_prod(release, states.ABORTED, "aborted", actor, source, {})


_ACTIONS = {
    "start": _start,
    "pause": _pause,
    "resume": _resume,
    "promote": _promote,
    "approve": _approve,
    "rollback": _rollback,
    "abort": _abort,
}


def _new_step_clock(release: Release, window_start: int | None = None) -> None:
    """The deadline counts from now; the next window starts at `window_start` (the end of
    the window just analysed) or now."""
    release.step_started_at = timezone.now()
    release.analysed_until = int(time.time()) if window_start is None else window_start


def _route_step(release: Release, actor: str) -> release_routing.Routing:
    """The current step as the service's member entry in the release's lane; answers the
    routing found before it."""
    step = release.steps[release.step]
    what = f"step {release.step + 1} of {len(release.steps)}: {release.step_label()}"
    try:
        return release_routing.route_step(
            release.service,
            release.lane,
            from_version=release.from_version,
            to_version=release.to_version,
            percent=0 if step.get("targeted") else step["percent"],
            mirror=release.mirror,
            actor=actor,
            comment=_comment(release, what),
        )
    except LookupError:
        raise Conflict(f"Lane {release.lane} does not exist any more.") from None


def _routing_found(release: Release) -> release_routing.Routing:
    """The service's routing in the release's lane, left as it is."""
    try:
        return release_routing.routing_in(load_state().document, release.service, release.lane)
    except KeyError:
        raise Conflict(f"Lane {release.lane} does not exist any more.") from None


def _step_routed(release: Release, kind: str, detail: dict, actor: str) -> None:
    """Event `kind` of the step just routed, once its gateways run it: now when none is
    awaited, else from the beat (releases/convergence.py)."""
    convergence.begin(release, kind, detail, actor, time.time())
    _step_applied(release)


def _step_applied(release: Release) -> bool:
    """Whether the current step runs on its gateways: the wait's event is written when it
    ends, and the release pauses when it waited too long."""
    if not convergence.waiting(release):
        return True
    settled = convergence.check(release, time.time())
    if settled is not None and settled.kind == convergence.NOT_CONVERGED:
        release.state = states.PAUSED
    release.save()
    _write(release, settled)
    return settled is not None and release.state != states.PAUSED


def _write(release: Release, settled: convergence.Settled | None) -> None:
    if settled is not None:
        _event(release, settled.kind, settled.detail, settled.actor or ANALYSIS_ACTOR)


def _routing_before(release: Release) -> release_routing.Routing:
    """What the release found when it started: set by its start (for a release under way
    before releases had it, by the data migration releases.0007)."""
    assert release.routing_before is not None, f"release {release.pk} has no routing_before"
    return cast(release_routing.Routing, release.routing_before)


def _comment(release: Release, what: str) -> str:
    """A routing revision's comment."""
    return f"Release {release.pk} of {release.service} {release.to_version}: {what}."


def _audit_view(release: Release) -> dict:
    view: dict = {"state": release.state, "step": release.step}
    if release.state == states.SCHEDULED and release.scheduled_at is not None:
        view["scheduled_at"] = release.scheduled_at.isoformat()
    return view


def _audit(
    release: Release, actor: str, source: str, action: str, before: object, after: object
) -> None:
    audit_log.record(
        actor=actor,
        source=source,
        action=action,
        object_label=f"release {release.pk} ({release.service} {release.to_version})",
        before=before,
        after=after,
    )


def _event(
    release: Release, kind: str, detail: dict, actor: str, notify: bool = True
) -> ReleaseEvent:
    """Record an event, publish it live and (`notify`) tell the webhooks, after commit."""
    event = ReleaseEvent.objects.create(
        release=release, kind=kind, step=release.step, detail=detail, actor=actor
    )
    if notify:
        transaction.on_commit(lambda: release_event.send_robust(sender=ReleaseEvent, event=event))
    live = events.ReleaseChanged(
        release=cast(events.ReleaseFields, dict(ReleaseSerializer(release).data)),
        event=cast(events.ReleaseEventFields, dict(ReleaseEventSerializer(event).data)),
    )
    transaction.on_commit(lambda: events.publish_best_effort(live))
    return event


# -- the analysis -----------------------------------------------------------------------------


def analyse_due(now: float | None = None) -> int:
    """Analyse every running release whose interval has ended, and fail those past their
    progress deadline. Answers how many were looked at. Safe to run from several workers:
    each release is locked, and a window is analysed once."""
    now = time.time() if now is None else now
    looked = 0
    for release_id in Release.objects.filter(state__in=states.ANALYSED).values_list(
        "pk", flat=True
    ):
        with transaction.atomic():
            release = _lock(release_id)
            if release.state in states.ANALYSED and analyse(release, now):
                looked += 1
    return looked


def _lock(release_id: int) -> Release:
    """Lock a release, and first the other releases of its bundle, always in pk order (a
    bundle's decision may change them all; one order means no deadlock)."""
    bundle_id = Release.objects.filter(pk=release_id).values_list("bundle_id", flat=True).get()
    if bundle_id is not None:
        list(Release.objects.select_for_update().filter(bundle_id=bundle_id).order_by("pk"))
    return Release.objects.select_for_update().get(pk=release_id)


def _bundle_others(release: Release) -> list[Release]:
    """The other releases of its bundle still under way, in dependency order."""
    if release.bundle_id is None:
        return []
    return list(
        Release.objects.filter(bundle_id=release.bundle_id, state__in=states.ACTIVE)
        .exclude(pk=release.pk)
        .order_by("position")
    )


def _back_to_prod_together(release: Release, state: str, kind: str) -> None:
    """A bundle fails as one: its other releases go back to prod, in reverse order."""
    for other in reversed(_bundle_others(release)):
        reason = f"{release.service} of the same bundle was {kind.replace('_', ' ')}"
        _finish_back_to_prod(other, state, kind, ANALYSIS_ACTOR, "release", {"reason": reason})


def analyse(release: Release, now: float) -> bool:
    """One interval of a locked release, if its step is applied (its gateways acked it) and
    one is due; then the deadline."""
    settings = analysis.Settings.of(release.analysis)
    applied = _step_applied(release)
    first = release.analysed_until or int(now)
    last = first + settings.interval_s - 1
    analysed = False
    if applied and last + 1 + REPORT_LAG_SECONDS <= now:
        _judge(release, settings, first, last)
        analysed = True
    if (
        release.state in states.ANALYSED
        and release.step_started_at is not None
        and timezone.now() - release.step_started_at > timedelta(seconds=settings.deadline_s)
    ):
        _finish_back_to_prod(
            release,
            states.FAILED,
            "failed",
            ANALYSIS_ACTOR,
            "release",
            {"reason": f"no progress past step {release.step + 1} in {settings.deadline_s} s"},
        )
        _back_to_prod_together(release, states.FAILED, "failed")
        analysed = True
    return analysed


def _counts(figures: Figures) -> analysis.Counts:
    return analysis.Counts(figures.total, figures.errors, figures.p95())


def _trusted_figures(release: Release, first: int, last: int) -> tuple[dict[str, Figures], dict]:
    """Both versions' figures over [first, last] from the gateways whose figures count now
    (in sync, fronting the service: gateways/fronting.py), and the detail saying whose."""
    versions = [release.to_version, release.from_version]
    reported = window_figures(release.service, versions, first, last)
    standing = analysis_standing(release.service, reported)
    used = [name for name, why in standing.items() if why is None]
    found = {version: Figures() for version in versions}
    for name in used:
        for version, figures in reported[name].items():
            found[version].add(figures.total, figures.errors, figures.histogram or {})
    ignored = {name: why for name, why in standing.items() if why is not None}
    return found, {"figures_from": used, "ignored_gateways": ignored}


def _judge(release: Release, settings: analysis.Settings, first: int, last: int) -> None:
    found, whose = _trusted_figures(release, first, last)
    gray, prod = _counts(found[release.to_version]), _counts(found[release.from_version])
    so_far = release.figures or {}
    since_gray = analysis.Counts(**so_far.get("gray", {})).plus(gray)
    since_prod = analysis.Counts(**so_far.get("prod", {})).plus(prod)
    verdict = analysis.judge(
        settings,
        window_gray=gray,
        window_prod=prod,
        since_start_gray=since_gray,
        since_start_prod=since_prod,
        failures=release.failures,
        metrics=promql_checks.evaluate(release, settings.metrics, settings.interval_s, last + 1),
    )
    release.analysed_until = last + 1
    release.figures = {
        "gray": {"total": since_gray.total, "errors": since_gray.errors},
        "prod": {"total": since_prod.total, "errors": since_prod.errors},
    }
    release.failures = verdict.failures
    detail = {
        **verdict.detail,
        "verdict": verdict.outcome,
        "window_start": first,
        "window_end": last + 1,
        "failures": verdict.failures,
        **whose,
    }
    if verdict.outcome == analysis.INSUFFICIENT_DATA:
        already = release.state == states.INSUFFICIENT_DATA  # notified when it began
        release.state = states.INSUFFICIENT_DATA
        release.save()
        _event(release, "insufficient_data", detail, ANALYSIS_ACTOR, notify=not already)
        return
    release.state = states.RUNNING
    together: list[Release] = [release]
    if release.bundle_id is not None:
        if verdict.advances:
            release.ready_at_step = release.step
        elif verdict.outcome in (analysis.FAILED, analysis.ROLLBACK):
            release.ready_at_step = None
        others = _bundle_others(release)
        waiting = [o.service for o in others if o.ready_at_step != release.step]
        if verdict.advances and waiting:
            detail["waiting_for"] = waiting
        together = sorted([release, *others], key=lambda r: r.position)
    release.save()
    _event(release, "analysis", detail, ANALYSIS_ACTOR)
    if verdict.outcome == analysis.ROLLBACK:
        _rollback(release, ANALYSIS_ACTOR, "release", {"reason": detail["reason"]})
        _back_to_prod_together(release, states.ROLLED_BACK, "rolled_back")
    elif verdict.advances and not detail.get("waiting_for") and not _held(together):
        # A bundle advances when all its releases are healthy at this step, in order.
        for member in together:
            _promote(
                member,
                ANALYSIS_ACTOR,
                "release",
                {"reason": detail["reason"]} if member is release else {"reason": "bundle"},
                window_start=last + 1 if member is release else member.analysed_until,
            )


def _held(together: list[Release]) -> bool:
    """Whether a freeze window of one of their services holds releases that would advance
    now: each says so once per window (event `frozen`), and the time held does not count
    against its deadline. Their analysis goes on, so a failure still rolls them back."""
    freeze = next(filter(None, (active_freeze(member.service) for member in together)), None)
    if freeze is None:
        return False
    for member in together:
        member.step_started_at = timezone.now()
        member.save(update_fields=["step_started_at"])
        if not member.events.filter(kind="frozen", detail__freeze=freeze.pk).exists():
            detail = {"freeze": freeze.pk, "reason": describe(freeze)}
            _event(member, "frozen", detail, ANALYSIS_ACTOR)
    return True


# Release events drawn on the service chart: the decisions, not every interval's analysis.
MARKER_KINDS = (
    "started",
    "advanced",
    "paused",
    "not_converged",
    "resumed",
    "insufficient_data",
    "awaiting_approval",
    "approved",
    "promoted",
    "rolled_back",
    "aborted",
    "failed",
)


def chart_markers(service: str, since_seconds: int = 86400) -> list[dict]:
    """`[{"ts", "label"}]` of the service's release decisions in the last day, oldest first."""
    since = timezone.now() - timedelta(seconds=since_seconds)
    rows = (
        ReleaseEvent.objects.filter(release__service=service, kind__in=MARKER_KINDS, at__gte=since)
        .select_related("release")
        .order_by("at", "id")[:500]
    )
    return [
        {
            "ts": event.at.timestamp(),
            "label": f"release {event.release_id} {event.release.to_version}: {event.kind} "
            f"(step {event.step + 1})",
        }
        for event in rows
    ]
