"""Issue 24: a release's page charts prod and gray success rate and p95 over the release's
span, from the per-minute figures the dashboard keeps, with its step changes marked. The
figures are read from what the charts draw (their data attributes), not from a picture."""

import json
import time
from datetime import UTC, datetime

import pytest

from metrics.latency import bucket_of
from metrics.models import MinuteLatency, MinuteRollup
from releases import services
from releases.models import ReleaseEvent
from releases.tests.conftest import QUIET_ANALYSIS

pytestmark = pytest.mark.browser

MINUTE = 60


def rollup(version, minute, total, errors, p95_ms):
    MinuteRollup.objects.create(
        service="user-app", version=version, minute=minute, total=total, errors=errors
    )
    MinuteLatency.objects.create(
        service="user-app", version=version, minute=minute, bucket=bucket_of(p95_ms), weight=total
    )


def at(kind, ts):
    ReleaseEvent.objects.filter(kind=kind).update(at=datetime.fromtimestamp(ts, tz=UTC))


@pytest.mark.usefixtures("fleet")
def test_the_release_page_charts_both_versions_with_its_steps_marked(
    page, make_role_user, log_in, screenshot
):
    release = services.create_release(
        service="user-app",
        to_version="V2",
        from_version=None,
        steps=[{"percent": 10}, {"percent": 50}],
        analysis_settings=QUIET_ANALYSIS,
        actor="olga",
        source="api",
    )
    for action in ("start", "promote", "promote"):  # advanced to 50 %, then promoted
        services.act(release.pk, action, actor="olga", source="api")
    # The release ran for ten minutes, a quarter of an hour ago.
    start = (int(time.time()) - 25 * MINUTE) // MINUTE * MINUTE
    at("created", start)
    at("started", start + 5)
    at("advanced", start + 5 * MINUTE + 5)
    at("promoted", start + 10 * MINUTE + 5)
    for n in range(-5, 16):  # before, during and after it: only its span is drawn
        rollup("V1", start + n * MINUTE, 1000, 1, 12.0)
        if 0 <= n <= 10:
            rollup("V2", start + n * MINUTE, 100 if n < 5 else 500, 3, 30.0)
    rollup("V3", start + 2 * MINUTE, 100, 0, 5.0)  # another version: not this release's

    make_role_user("vera", "viewer")
    log_in("vera")
    page.goto(f"/releases/{release.pk}/")
    success = page.locator("#release-chart-success")
    success.locator("canvas").wait_for()
    drawn = json.loads(success.get_attribute("data-series"))
    assert drawn == {"prod V1": 11, "gray V2": 11}
    latency = json.loads(page.locator("#release-chart-latency").get_attribute("data-series"))
    assert latency == {"prod V1": 11, "gray V2": 11}
    assert page.locator("#release-chart-success .u-legend").text_content().count("V3") == 0

    markers = json.loads(page.locator("#release-chart-card").get_attribute("data-markers"))
    assert [(m["kind"], m["ts"]) for m in markers] == [
        ("started", start + 5),
        ("advanced", start + 5 * MINUTE + 5),
        ("promoted", start + 10 * MINUTE + 5),
    ]
    assert markers[1]["label"] == "advanced at step 2 (50 %)"
    # Pointing at the step change names it: the x axis runs from the first minute to a
    # step past the end.
    box = success.locator(".u-over").bounding_box()
    low, high = start, start + 10 * MINUTE + 5 + MINUTE
    x = box["x"] + box["width"] * (markers[1]["ts"] - low) / (high - low)
    page.mouse.move(x, box["y"] + box["height"] / 2)
    assert "advanced at step 2 (50 %)" in page.locator("#release-marker-info").text_content()
    screenshot("release-chart")
