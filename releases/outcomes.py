"""How releases ended, per service: counts by outcome, the median time from start to
promotion and the change-failure rate. Shared by the API (`/api/v1/releases/stats/`), the
releases page and `/metrics`; counted and ranked by the database, however many releases."""

from dataclasses import asdict, dataclass
from datetime import datetime

from django.db.models import (
    Count,
    DurationField,
    ExpressionWrapper,
    F,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Window,
)
from django.db.models.functions import RowNumber

from releases import states
from releases.models import Release, ReleaseEvent

# Counted as failed changes: the analysis or an operator took the version back, or it never
# got past a step in time. An abort is a change not made, a promotion one that held.
FAILED_CHANGES = (states.ROLLED_BACK, states.FAILED)


@dataclass(frozen=True)
class ServiceOutcomes:
    service: str
    promoted: int
    rolled_back: int
    aborted: int
    failed: int
    finished: int
    # Percent of the finished releases that were rolled back or failed.
    change_failure_rate: float | None
    # From the release's first `started` event to its `promoted` event.
    median_seconds_to_promote: float | None

    def as_dict(self) -> dict:
        return asdict(self)


def per_service(service: str | None = None, since: datetime | None = None) -> list[ServiceOutcomes]:
    """The finished releases of every service (or `service`) created at or after `since`,
    by service name."""
    finished = Release.objects.filter(state__in=states.FINISHED)
    if service is not None:
        finished = finished.filter(service=service)
    if since is not None:
        finished = finished.filter(created_at__gte=since)
    counts = (
        finished.values("service")
        .annotate(**{state: Count("pk", filter=Q(state=state)) for state in states.FINISHED})
        .values_list("service", *states.FINISHED)
        .order_by("service")
    )
    medians = _median_seconds_to_promote(finished.filter(state=states.PROMOTED))
    answer = []
    for name, *numbers in counts:
        by = dict(zip(states.FINISHED, numbers, strict=True))
        total = sum(numbers)
        failed = sum(by[state] for state in FAILED_CHANGES)
        answer.append(
            ServiceOutcomes(
                service=name,
                promoted=by[states.PROMOTED],
                rolled_back=by[states.ROLLED_BACK],
                aborted=by[states.ABORTED],
                failed=by[states.FAILED],
                finished=total,
                change_failure_rate=round(100.0 * failed / total, 2) if total else None,
                median_seconds_to_promote=medians.get(name),
            )
        )
    return answer


def _median_seconds_to_promote(promoted: QuerySet[Release]) -> dict[str, float]:
    """service -> the median of its promoted releases' start-to-promotion times. The database
    ranks each service's durations and answers only the middle one (odd count) or two."""
    events = ReleaseEvent.objects.filter(release=OuterRef("pk")).order_by("at", "id")
    durations = (
        promoted.annotate(
            started_at=Subquery(events.filter(kind="started").values("at")[:1]),
            promoted_at=Subquery(events.filter(kind="promoted").values("at")[:1]),
        )
        .filter(started_at__isnull=False, promoted_at__isnull=False)
        .annotate(
            duration=ExpressionWrapper(
                F("promoted_at") - F("started_at"), output_field=DurationField()
            )
        )
        .annotate(
            rank=Window(RowNumber(), partition_by=F("service"), order_by=F("duration").asc()),
            of=Window(Count("pk"), partition_by=F("service")),
        )
        # Integer division: rank 3 of 5; ranks 2 and 3 of 4.
        .filter(rank__gte=(F("of") + 1) / 2, rank__lte=F("of") / 2 + 1)
    )
    middle: dict[str, list[float]] = {}
    for service, duration in durations.values_list("service", "duration"):
        middle.setdefault(service, []).append(duration.total_seconds())
    return {service: round(sum(found) / len(found), 3) for service, found in middle.items()}
