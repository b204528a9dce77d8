"""What the release page's chart draws: gray and prod success rate and p95 over the
release's span, from the per-minute rollups the dashboard keeps (metrics.services), and the
release's decisions (its step changes) as markers."""

import time

from metrics.services import span_series
from releases import states
from releases.models import Release
from releases.services import MARKER_KINDS


def step_for(seconds: float) -> int:
    """Seconds per point: a minute (the rollups' grain) up to an hour's span, then coarser,
    as the service page's ranges."""
    return 60 if seconds <= 3600 else 300 if seconds <= 21600 else 900


def release_chart(release: Release) -> dict | None:
    """`{"start", "end", "ongoing", "step", "from_version", "to_version", "success_rate",
    "latency", "markers"}` (series as the metrics API's, both versions only; markers
    `[{"ts", "kind", "label"}]`; `ongoing`: not finished, `end` is now), or None before it
    started."""
    decisions = list(release.events.filter(kind__in=MARKER_KINDS).order_by("at", "id"))
    started = next((event for event in decisions if event.kind == "started"), None)
    if started is None:
        return None
    start = int(started.at.timestamp())
    ended = decisions[-1] if release.state in states.FINISHED else None
    end = int(ended.at.timestamp()) if ended is not None else int(time.time())
    step = step_for(end - start)
    versions = (release.from_version, release.to_version)
    series = span_series(release.service, start, end, step)
    return {
        "start": start,
        "end": end,
        "ongoing": ended is None,
        "step": step,
        "from_version": release.from_version,
        "to_version": release.to_version,
        **{
            figure: {v: points for v, points in by_version.items() if v in versions}
            for figure, by_version in series.items()
        },
        "markers": [
            {
                "ts": event.at.timestamp(),
                "kind": event.kind,
                "label": f"{event.kind.replace('_', ' ')} at step {event.step + 1} "
                f"({release.step_label(event.step)})",
            }
            for event in decisions
        ],
    }
