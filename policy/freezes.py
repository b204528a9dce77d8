"""Freeze windows: which one, if any, holds a service at a moment; making and ending them
(audited)."""

from datetime import datetime

from django.db import transaction
from django.utils import timezone

import events
from audit import log as audit_log
from policy.models import Freeze


def active_freezes(at: datetime | None = None) -> list[Freeze]:
    """The windows under way at `at` (now by default), the one ending last first."""
    moment = at or timezone.now()
    current = Freeze.objects.filter(starts_at__lte=moment, ends_at__gt=moment)
    return list(current.order_by("-ends_at", "id"))


def covering(freezes: list[Freeze], service: str) -> Freeze | None:
    return next((freeze for freeze in freezes if freeze.covers(service)), None)


def active_freeze(service: str, at: datetime | None = None) -> Freeze | None:
    """The window covering `service` at `at` (now by default) that ends last, or None."""
    return covering(active_freezes(at), service)


def describe(freeze: Freeze) -> str:
    """How a refusal names the window: `freeze window 3 (until ...Z): <reason>`."""
    until = freeze.ends_at.isoformat().replace("+00:00", "Z")
    return f"freeze window {freeze.pk} (until {until}): {freeze.reason}"


def upcoming(now: datetime | None = None) -> list[Freeze]:
    """Windows not over yet, soonest first."""
    return list(Freeze.objects.filter(ends_at__gt=now or timezone.now()))


class AlreadyOver(Exception):
    """A window in the past cannot be ended or removed (409): it is history."""


def _view(freeze: Freeze) -> dict:
    return {
        "starts_at": freeze.starts_at.isoformat(),
        "ends_at": freeze.ends_at.isoformat(),
        "services": freeze.services,
        "reason": freeze.reason,
    }


def create_freeze(
    *,
    starts_at: datetime,
    ends_at: datetime,
    services: list[str],
    reason: str,
    actor: str,
    source: str,
) -> Freeze:
    with transaction.atomic():
        freeze = Freeze.objects.create(
            starts_at=starts_at, ends_at=ends_at, services=services, reason=reason, created_by=actor
        )
        audit_log.record(
            actor=actor,
            source=source,
            action="freeze.create",
            object_label=f"freeze window {freeze.pk}",
            before=None,
            after=_view(freeze),
        )
    events.publish_best_effort(events.FreezeChanged(freeze=freeze.pk))
    return freeze


def end_freeze(freeze_id: int, *, actor: str, source: str) -> Freeze | None:
    """A window not begun yet is removed (None); one in progress ends now (answered).
    DoesNotExist; AlreadyOver."""
    now = timezone.now()
    with transaction.atomic():
        freeze = Freeze.objects.select_for_update().get(pk=freeze_id)
        if freeze.ends_at <= now:
            raise AlreadyOver(f"Freeze window {freeze.pk} is over already.")
        before = _view(freeze)
        if freeze.starts_at > now:
            freeze.delete()
            ended = None
        else:
            freeze.ends_at = now
            freeze.save(update_fields=["ends_at"])
            ended = freeze
        audit_log.record(
            actor=actor,
            source=source,
            action="freeze.end" if ended else "freeze.delete",
            object_label=f"freeze window {freeze_id}",
            before=before,
            after=_view(ended) if ended else None,
        )
    events.publish_best_effort(events.FreezeChanged(freeze=freeze_id))
    return ended
