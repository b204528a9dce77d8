"""The traffic split of a service (metrics.services.traffic_split) as bars and lists: SVG
rectangles placed by attributes and coloured by classes, since the Content-Security-Policy
allows no inline style."""

from dataclasses import dataclass
from typing import Any

from django import template

from metrics.services import Share, TrafficSplit
from routing_engine.lanes import GRAY_LANE

register = template.Library()

# Colours of versions and lanes that are neither prod nor gray (static/css/app.css), in turn.
OTHER_COLOURS = 4


@dataclass(frozen=True)
class Segment:
    label: str
    title: str  # what the label stands for, when it is not plain
    percent: str  # as shown
    x: str  # where its bar starts, 0-100 (SVG user units: no locale's decimal comma)
    width: str
    colour: str  # a class


def _shown(percent: float) -> str:
    """Whole percents, but never a share that is there shown as 0 or one that is not all
    as 100."""
    if 0 < percent < 1:
        return "<1 %"
    if 99 < percent < 100:
        return ">99 %"
    return f"{round(percent)} %"


def _segments(
    shares: list[Share], colour_of: dict[str, str], labels: dict[str, str]
) -> list[Segment]:
    segments, x, others = [], 0.0, 0
    for share in shares:
        colour = colour_of.get(share.name)
        if colour is None:
            colour, others = f"seg-{others % OTHER_COLOURS}", others + 1
        segments.append(
            Segment(
                label=labels.get(share.name, share.name),
                title="PROD and ALL requests" if share.name in labels else "",
                percent=_shown(share.percent),
                x=f"{x:.3f}",
                width=f"{share.percent:.3f}",
                colour=colour,
            )
        )
        x += share.percent
    return segments


@dataclass(frozen=True)
class Row:
    heading: str
    key: str
    segments: list[Segment]
    bar: bool


@register.inclusion_tag("dashboard/_traffic_split.html")
def traffic_split(
    split: TrafficSplit | None, prod: str, gray: str, compact: bool = False
) -> dict[str, Any]:
    """`split`'s versions (prod and gray in their colours) and lanes (none in prod's, gray
    in gray's), each a bar with its shares listed. `compact` (a table cell): the versions'
    bar, and the lanes listed without a bar of their own, only those of GRAY requests."""
    if split is None:
        return {"split": None}
    versions = _segments(split.versions, {prod: "seg-prod", gray: "seg-gray"}, {})
    lanes = _segments(split.lanes, {"": "seg-prod", GRAY_LANE: "seg-gray"}, {"": "no lane"})
    rows = [Row("Versions", "versions", versions, bar=True)]
    if not compact:
        rows.append(Row("Lanes", "lanes", lanes, bar=True))
    elif gray_lanes := [s for s, share in zip(lanes, split.lanes, strict=True) if share.name]:
        rows.append(Row("Lanes", "lanes", gray_lanes, bar=False))
    return {"split": split, "compact": compact, "rows": rows}
