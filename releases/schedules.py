"""Scheduled starts: `start` with a time puts a pending release in `scheduled`
(releases/services.py); the beat job that runs the analysis starts it once its time has
come, through the operator's own `start` (the same checks). A freeze window over its
service holds it scheduled until the window ends, as does anything else that refuses the
start now (another release under way, gray routing off): it is tried again each beat, and
the timeline says once why it waits."""

from dataclasses import dataclass
from datetime import UTC, datetime

from django.db import transaction
from django.utils import timezone

from policy import freezes
from policy.models import Freeze
from releases import services, states
from releases.models import Release

# Who the audit log and the timeline name for a scheduled start.
SCHEDULE_ACTOR = "release-schedule"
# Most scheduled releases the releases page lists.
LISTED_SCHEDULED = 50


def start_due(now: float | None = None) -> int:
    """Start every scheduled release whose time has come (`now`: epoch seconds, the clock
    by default). Answers how many started."""
    moment = timezone.now() if now is None else datetime.fromtimestamp(now, UTC)
    started = 0
    due = Release.objects.filter(state=states.SCHEDULED, scheduled_at__lte=moment)
    for release in due.order_by("scheduled_at", "pk"):
        freeze = freezes.active_freeze(release.service, moment)
        if freeze is not None:
            until = f"{freeze.ends_at:%Y-%m-%d %H:%M:%S} UTC"
            _hold(
                release.pk,
                "frozen",
                {"freeze": freeze.pk, "reason": f"frozen until {until}: {freeze.reason}"},
            )
            continue
        try:
            services.act(release.pk, "start", actor=SCHEDULE_ACTOR, source="release")
        except services.Conflict as exc:
            _hold(release.pk, "start_refused", {"reason": str(exc)})
        else:
            started += 1
    return started


def _hold(release_id: int, kind: str, detail: dict) -> None:
    """The release stays scheduled: say why, unless its newest event says so already (or
    an operator started or aborted it meanwhile)."""
    with transaction.atomic():
        release = Release.objects.select_for_update().get(pk=release_id)
        if release.state != states.SCHEDULED:
            return
        newest = release.events.first()
        if newest is None or (newest.kind, newest.detail.get("reason")) != (kind, detail["reason"]):
            services.note(release, kind, detail, SCHEDULE_ACTOR)


@dataclass(frozen=True)
class Upcoming:
    """A freeze window or a scheduled start, for the releases page's calendar."""

    at: datetime
    until: datetime | None = None
    freeze: Freeze | None = None
    release: Release | None = None


def upcoming(now: datetime | None = None) -> list[Upcoming]:
    """Freeze windows not over yet and scheduled releases, soonest first."""
    found = [Upcoming(f.starts_at, until=f.ends_at, freeze=f) for f in freezes.upcoming(now)]
    scheduled = Release.objects.filter(state=states.SCHEDULED, scheduled_at__isnull=False)
    found += [
        Upcoming(r.scheduled_at, release=r)
        for r in scheduled.order_by("scheduled_at", "pk")[:LISTED_SCHEDULED]
        if r.scheduled_at is not None
    ]
    return sorted(found, key=lambda item: item.at)
