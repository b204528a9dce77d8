"""What an operator must act on, as the overview's badges show it: quarantined versions,
gateways failing or gone quiet, releases paused or waiting for approval, freeze windows in
force. Each badge links to the page where the operator acts. The overview renders them with
the page and fetches them again (the `needs_action` view) when a live event may have changed
them, and at `next_change`: a freeze window beginning or ending, or a gateway going stale,
changes them with no event."""

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.urls import reverse
from django.utils import timezone

from gateways import generation
from gateways.models import Gateway
from policy.freezes import active_freezes
from policy.lanes import quarantined_of
from policy.models import Freeze
from releases import states
from releases.models import Release

from .templatetags.service_links import service_url

# Gateways named in their badge; past these, it counts the others.
NAMED_GATEWAYS = 3
RELEASE_WAITS = {states.PAUSED: "paused", states.AWAITING_APPROVAL: "awaits approval"}


@dataclass(frozen=True)
class Badge:
    kind: str  # quarantine, gateway, release or freeze: the badge's look and tests' handle
    text: str
    url: str
    title: str  # what acting on it means, for the pointer and screen readers


@dataclass(frozen=True)
class NeedsAction:
    badges: list[Badge]
    next_change: datetime | None  # when time alone changes them (None: only events do)


def _quarantines(document: dict[str, Any]) -> list[Badge]:
    return [
        Badge(
            "quarantine",
            f"{version} of {service} quarantined",
            f"{service_url(service)}#quarantine" if service_url(service) else "",
            "No traffic at all until an operator lifts the quarantine (the service page).",
        )
        for service, versions in sorted(quarantined_of(document).items())
        for version in versions
    ]


def _gateways(now: datetime) -> tuple[list[Badge], datetime | None]:
    current = generation.newest_number()
    troubled, next_stale = [], None
    stale_after = timedelta(seconds=settings.GATEWAY_STALE_SECONDS)
    for gateway in Gateway.objects.order_by("name"):
        status = gateway.status_at(current, now)
        if status in (Gateway.FAILING, Gateway.STALE):
            troubled.append((gateway.name, status))
        elif gateway.mode == Gateway.PULL:
            stale_at = (gateway.last_seen or gateway.created_at) + stale_after
            next_stale = stale_at if next_stale is None else min(next_stale, stale_at)
    if not troubled:
        return [], next_stale
    words = {Gateway.FAILING: "failing", Gateway.STALE: "not heard from"}
    if len(troubled) == 1:
        name, status = troubled[0]
        text = f"gateway {name} {words[status]}"
    else:
        named = ", ".join(name for name, _ in troubled[:NAMED_GATEWAYS])
        more = len(troubled) - NAMED_GATEWAYS
        text = f"{len(troubled)} gateways failing or not heard from: {named}" + (
            f" and {more} more" if more > 0 else ""
        )
    title = (
        "Failing: the delivery of the live routing document errored; not heard from: a pull "
        "gateway stopped polling. The gateways page says why."
    )
    return [Badge("gateway", text, reverse("gateways:status"), title)], next_stale


def _releases() -> list[Badge]:
    waiting = Release.objects.filter(state__in=list(RELEASE_WAITS)).order_by("id")
    return [
        Badge(
            "release",
            f"release {release.pk} of {release.service} {RELEASE_WAITS[release.state]}",
            reverse("dashboard:release", args=[release.pk]),
            "Resume, promote or roll it back on its page."
            if release.state == states.PAUSED
            else "Another operator approves or rejects it on its page.",
        )
        for release in waiting
    ]


def _freezes(now: datetime) -> tuple[list[Badge], datetime | None]:
    current = active_freezes(now)
    badges = [
        Badge(
            "freeze",
            f"freeze until {freeze.ends_at.astimezone(UTC):%H:%M} UTC: "
            + (", ".join(freeze.services) if freeze.services else "every service"),
            reverse("dashboard:releases") + "#upcoming",
            f"{freeze.reason}. No release starts or advances and no routing change is made "
            "but by an admin's override.",
        )
        for freeze in current
    ]
    starts = Freeze.objects.filter(starts_at__gt=now).order_by("starts_at")
    first_start = starts.values_list("starts_at", flat=True).first()
    moments = [freeze.ends_at for freeze in current] + ([first_start] if first_start else [])
    return badges, min(moments) if moments else None


def needs_action(document: dict[str, Any], now: datetime | None = None) -> NeedsAction:
    now = now or timezone.now()
    gateways, stale_at = _gateways(now)
    freezes, freeze_change = _freezes(now)
    changes = [moment for moment in (stale_at, freeze_change) if moment is not None]
    return NeedsAction(
        [*_quarantines(document), *gateways, *_releases(), *freezes],
        min(changes) if changes else None,
    )
