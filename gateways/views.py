from collections.abc import Iterable
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone

from accounts.decorators import role_required
from accounts.roles import VIEWER
from gateways import generation
from gateways.lane_support import readable_skipped
from gateways.models import Gateway

# Status -> badge class of app.css.
BADGES = {
    Gateway.IN_SYNC: "state-up",
    Gateway.PENDING: "state-starting",
    Gateway.FAILING: "state-unhealthy",
    Gateway.STALE: "state-offline",
}


def status_rows(gateways: Iterable[Gateway]) -> tuple[int, list[dict[str, Any]]]:
    """(current generation, a row per gateway with its status and badge, the revision its
    acked generation holds, and its skipped records with the lanes among them): the gateways
    page's table, also on the overview."""
    current = generation.newest_number()
    now = timezone.now()
    rows = []
    revisions: dict[int, int | None] = {}
    for gateway in gateways:
        status = gateway.status_at(current, now)
        acked = gateway.acked_generation
        if acked not in revisions:
            revisions[acked] = generation.revision_of(acked)
        rows.append(
            {
                "gateway": gateway,
                "status": status,
                "badge": BADGES[status],
                "acked_revision": revisions[acked],
                "skipped": readable_skipped(gateway.skipped),
            }
        )
    return current, rows


@role_required(VIEWER)
def gateway_status(request: HttpRequest) -> HttpResponse:
    """Every gateway and the generation it runs; live-updated by `gateway` events."""
    current, rows = status_rows(Gateway.objects.all())
    context = {
        "rows": rows,
        "generation": current,
        "revision": generation.revision_of(current),
        "badges": BADGES,
    }
    return render(request, "gateways/status.html", context)
