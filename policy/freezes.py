"""Freeze windows: which one, if any, holds a service at a moment."""

from datetime import datetime

from django.utils import timezone

from policy.models import Freeze


def active_freeze(service: str, at: datetime | None = None) -> Freeze | None:
    """The window covering `service` at `at` (now by default) that ends last, or None."""
    moment = at or timezone.now()
    current = Freeze.objects.filter(starts_at__lte=moment, ends_at__gt=moment).order_by("-ends_at")
    return next((freeze for freeze in current if freeze.covers(service)), None)


def upcoming(now: datetime | None = None) -> list[Freeze]:
    """Windows not over yet, soonest first."""
    return list(Freeze.objects.filter(ends_at__gt=now or timezone.now()))
