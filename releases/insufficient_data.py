"""What the release page says when `insufficient_data` repeats: the hint of the newest
interval (releases/analysis.py computes it from the rates that interval saw)."""

from releases import states
from releases.models import Release


def repeated_hint(release: Release) -> str | None:
    """The hint of the newest interval, when it and the one before at this step were both
    short of data (one short interval is routine: a step's first, traffic coming up)."""
    if release.state != states.INSUFFICIENT_DATA:
        return None
    latest = list(
        release.events.filter(kind__in=("analysis", "insufficient_data"), step=release.step)[:2]
    )
    if len(latest) < 2 or any(event.kind != "insufficient_data" for event in latest):
        return None
    return latest[0].detail.get("hint")
