"""Shadow traffic's diff: the comparisons gateways send (`POST /api/v1/shadow-comparisons/`),
kept per release and path, and the summary the release page and
`GET /api/v1/releases/{id}/shadow/` show.

Kept in the database, not in the live windows: a comparison is already an aggregate (a
gateway sends one per path and report), the rows are few and bounded (MAX_PATHS per release,
MAX_PAIRS latency pairs per row), and the diff stays readable after the release ends, when
an operator asks why it was rolled back. A comparison is of the active release of its
service whose from/to versions are the comparison's prod/mirror versions; one of no such
release (a lane's own mirror) is counted in the answer and not kept.
"""

import math
from collections.abc import Iterable
from typing import Any

from django.db import transaction

from releases import states
from releases.models import Release, ShadowComparison

MAX_PATHS = 200
OTHER_PATHS = "(other)"
MAX_PAIRS = 200
DIFFERING_PATHS_SHOWN = 10
STATUS_CLASSES = ("1xx", "2xx", "3xx", "4xx", "5xx", "error")


def ingest(comparisons: Iterable[dict[str, Any]]) -> tuple[int, int]:
    """Add the gateway's comparisons to their releases' rows; (kept, without a release)."""
    kept = unattributed = 0
    releases: dict[tuple[str, str, str], Release | None] = {}
    with transaction.atomic():
        for comparison in comparisons:
            key = (comparison["service"], comparison["prod_version"], comparison["version"])
            if key not in releases:
                releases[key] = (
                    Release.objects.select_for_update()
                    .filter(
                        service=key[0],
                        from_version=key[1],
                        to_version=key[2],
                        state__in=states.ACTIVE,
                    )  # fmt: skip
                    .order_by("pk")
                    .first()
                )
            release = releases[key]
            if release is None:
                unattributed += 1
                continue
            _add(release, comparison)
            kept += 1
    return kept, unattributed


def _add(release: Release, comparison: dict[str, Any]) -> None:
    path = comparison["path"][:512]
    row = ShadowComparison.objects.filter(release=release, path=path).first()
    if row is None:
        if release.shadow_comparisons.count() >= MAX_PATHS - 1:
            path = OTHER_PATHS
        row, _ = ShadowComparison.objects.get_or_create(release=release, path=path)
    row.total += comparison["total"]
    row.body_mismatched += comparison["body_mismatched"]
    classes = dict(row.classes)
    for name, counts in comparison["classes"].items():
        before = classes.get(name, {"total": 0, "mismatched": 0})
        classes[name] = {key: before[key] + counts[key] for key in ("total", "mismatched")}
    row.classes = classes
    row.latency_ms = (list(row.latency_ms) + comparison["latency_ms"])[-MAX_PAIRS:]
    if comparison.get("example"):
        row.example = comparison["example"]
    row.save()


def _percentile(values: list[float], share: float) -> float | None:
    """Nearest rank."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(share * len(ordered)) - 1)]


def _rate(part: int, whole: int) -> float | None:
    return round(100 * part / whole, 2) if whole else None


def _shift(mirror: float | None, prod: float | None) -> float | None:
    return None if mirror is None or prod is None else round(mirror - prod, 3)


def summary(release: Release) -> dict[str, Any]:
    rows = list(release.shadow_comparisons.all())
    total = sum(row.total for row in rows)
    classes: dict[str, dict[str, Any]] = {}
    for row in rows:
        for name, counts in row.classes.items():
            merged = classes.setdefault(name, {"total": 0, "mismatched": 0})
            merged["total"] += counts["total"]
            merged["mismatched"] += counts["mismatched"]
    for counts in classes.values():
        counts["rate"] = _rate(counts["mismatched"], counts["total"])
    status_mismatched = sum(counts["mismatched"] for counts in classes.values())
    body_mismatched = sum(row.body_mismatched for row in rows)
    prod = [pair[0] for row in rows for pair in row.latency_ms]
    mirror = [pair[1] for row in rows for pair in row.latency_ms]
    latency: dict[str, Any] = {}
    for name, share in (("p50", 0.5), ("p95", 0.95)):
        prod_at, mirror_at = _percentile(prod, share), _percentile(mirror, share)
        latency[name] = {"prod": prod_at, "mirror": mirror_at, "shift": _shift(mirror_at, prod_at)}

    def mismatched(row: ShadowComparison) -> int:
        return row.body_mismatched + sum(c["mismatched"] for c in row.classes.values())

    differing = sorted((row for row in rows if mismatched(row)), key=lambda r: -mismatched(r))
    return {
        "release": release.pk,
        "service": release.service,
        "prod_version": release.from_version,
        "version": release.to_version,
        "mirror": release.mirror,
        "comparisons": total,
        "mismatch_rate": _rate(status_mismatched + body_mismatched, total),
        "status_classes": dict(sorted(classes.items())),
        "body_mismatched": body_mismatched,
        "body_mismatch_rate": _rate(body_mismatched, total),
        "latency_ms": latency,
        "differing_paths": [
            {
                "path": row.path,
                "comparisons": row.total,
                "status_mismatched": mismatched(row) - row.body_mismatched,
                "body_mismatched": row.body_mismatched,
                "example": row.example,
            }
            for row in differing[:DIFFERING_PATHS_SHOWN]
        ],
    }
