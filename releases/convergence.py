"""Convergence-gated steps: a release step counts as applied once the gateways fronting its
service have acked the gateway document generation that carries it, and its analysis
starts only then.

When a step is routed (a policy revision), `begin` keeps on the release what the step waits
for: that revision, the event that will say the step is applied (`started` or `advanced`)
and the acks seen so far. `check`, at once and then from the beat every second, finds the
generation that carries the revision (the first one made at or after it) and which gateways
have acked it. The gateways fronting the service (gateways/fronting.py) are awaited, but
those gone stale, which are named and do not block. Once RELEASE_CONVERGENCE_SHARE of the
awaited ones have acked, the step's event is written with the generation, acked / gateways
and the propagation (ack time minus the generation's publish time), and the step's analysis
window starts no earlier than the ack that completed it: samples from before do not count.
Not converged within RELEASE_CONVERGENCE_TIMEOUT seconds: event `not_converged` naming the
gateways that did not ack, and the release pauses; resuming it waits again.

A gateway's ack time is its row's `acked_at` as first seen at or above the step's
generation: the beat looks every second, so it is that generation's ack unless the gateway
acked a newer one within the same second.
"""

import math
import statistics
from dataclasses import dataclass

from django.conf import settings
from django.utils import timezone

from gateways import fronting, generation
from gateways.models import Gateway, Generation
from policy.publishing import load_state
from releases.models import Release

NOT_CONVERGED = "not_converged"


@dataclass(frozen=True)
class Settled:
    """What a step's wait ended in: the event to write (the step's own, or `not_converged`)
    and who it is by (None: the analysis)."""

    kind: str
    detail: dict
    actor: str | None


@dataclass(frozen=True)
class _Look:
    """The step's gateways as they are now: those awaited, and which of them acked when."""

    awaited: list[str]
    stale: list[str]
    acks: dict[str, float]
    required: int


def begin(release: Release, kind: str, detail: dict, actor: str, now: float) -> None:
    """The step just routed (its revision is the live one) waits for its gateways before
    its event `kind` is written."""
    release.convergence = {
        "kind": kind,
        "detail": detail,
        "actor": actor,
        "revision": load_state().revision,
        "generation": None,
        "published_at": None,
        "since": now,
        "acks": {},
    }


def waiting(release: Release) -> bool:
    return bool(release.convergence)


def wait_again(release: Release, now: float) -> None:
    """A resumed release gives its step a new RELEASE_CONVERGENCE_TIMEOUT."""
    if waiting(release):
        release.convergence["since"] = now


def check(release: Release, now: float) -> Settled | None:
    """None while the step waits (the acks seen are kept on the release); else its event,
    the step applied, or `not_converged` once it waited too long."""
    look = _look(release, now)
    wait = release.convergence
    figures = _figures(wait, look)
    if len(look.acks) >= look.required:
        if look.required:
            completed = sorted(look.acks.values())[look.required - 1]
            release.analysed_until = max(release.analysed_until or 0, math.ceil(completed))
        release.convergence = {}
        return Settled(
            wait["kind"], {**wait["detail"], **figures, "converged": True}, wait["actor"]
        )
    timeout = settings.RELEASE_CONVERGENCE_TIMEOUT
    if now - wait["since"] <= timeout:
        return None
    missing = [name for name in look.awaited if name not in look.acks]
    generation_text = (
        f"generation {wait['generation']}"
        if wait["generation"] is not None
        else f"the generation of revision {wait['revision']}"
    )
    reason = (
        f"{figures['acked']} of {figures['gateways']} gateways acked {generation_text} in "
        f"{timeout:g} s ({look.required} needed); not acked: {', '.join(missing)}"
    )
    return Settled(NOT_CONVERGED, {**figures, "not_acked": missing, "reason": reason}, None)


def flush(release: Release, now: float) -> Settled | None:
    """The event of a step still waiting when the release moves on (an operator's promote,
    a rollback, an abort), with what was acked so far; None when no step waits."""
    if not waiting(release):
        return None
    wait = release.convergence
    figures = _figures(wait, _look(release, now))
    release.convergence = {}
    return Settled(wait["kind"], {**wait["detail"], **figures, "converged": False}, wait["actor"])


def _look(release: Release, now: float) -> _Look:
    wait = release.convergence
    if wait["generation"] is None:
        carrying = (
            Generation.objects.filter(revision__gte=wait["revision"])
            .order_by("number")
            .values_list("number", "created_at")
            .first()
        )
        if carrying is not None:
            wait["generation"], wait["published_at"] = carrying[0], carrying[1].timestamp()
    awaited, stale = _fronting(release.service)
    if wait["generation"] is not None:
        for gateway in awaited:
            if gateway.acked_generation >= wait["generation"]:
                at = gateway.acked_at.timestamp() if gateway.acked_at else now
                wait["acks"].setdefault(gateway.name, at)
    names = [gateway.name for gateway in awaited]
    share = settings.RELEASE_CONVERGENCE_SHARE
    return _Look(
        awaited=names,
        stale=stale,
        acks={name: at for name, at in wait["acks"].items() if name in names},
        # Rounded first: 0.7 * 10 is 7.000000000000001 in floating point.
        required=math.ceil(round(share * len(names), 9)),
    )


def _fronting(service: str) -> tuple[list[Gateway], list[str]]:
    """The gateways fronting the service that are not stale, and the names of those that
    are."""
    current = generation.newest_number()
    now = timezone.now()
    awaited: list[Gateway] = []
    stale: list[str] = []
    # One that acked no document fronts nothing.
    for gateway in Gateway.objects.exclude(acked_generation=0).order_by("name"):
        if fronting.refusals(gateway, {service}):
            continue
        if gateway.status_at(current, now) == Gateway.STALE:
            stale.append(gateway.name)
        else:
            awaited.append(gateway)
    return awaited, stale


def _figures(wait: dict, look: _Look) -> dict:
    """The detail's convergence figures: generation, acked / gateways, propagation."""
    published = wait["published_at"]
    delays = sorted(max(0.0, at - published) * 1000 for at in look.acks.values())
    return {
        "generation": wait["generation"],
        "acked": len(look.acks),
        "gateways": len(look.awaited),
        "propagation_ms": {
            "p50": round(statistics.median(delays)) if delays else None,
            "max": round(delays[-1]) if delays else None,
        },
        "stale_gateways": look.stale,
    }
