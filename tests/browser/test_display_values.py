"""Figures a page adds live read as the server's: static/js/numbers.js formats as the
template filters (dashboard/templatetags/display.py) do, and a release's timeline row that
arrives over the live socket (played here by the test) shows them rounded and its kind in
words, once."""

import json

import pytest

import events
from dashboard.templatetags import display
from dashboard.tests.test_display_values import (
    ANALYSIS,
    FIGURES,
    INSUFFICIENT,
    make_analysed_release,
)
from releases.serializers import ReleaseEventSerializer, ReleaseSerializer

pytestmark = pytest.mark.browser

JS_NAMES = {"points": "points", "rate": "rate", "ratio": "ratio", "p_value": "pValue"}
# More than FIGURES: halves, tiny and huge values, where the two could round apart.
VALUES = [None, 0.0, -0.005, 0.005, 0.125, -0.125, 0.0499, 0.05, 0.95, 9.95, 9.96, 10.5]
VALUES += [0.0009999, 0.001, 0.00999, 0.01, 0.015, 99.95, 100.0]
RATIOS = [999.5, 1000.0, 125000.0, 9.96e-5, 1.5e-300, 3.7e300]


def test_numbers_js_formats_as_the_template_filters(page, make_role_user, log_in):
    release = make_analysed_release()
    make_role_user("vera", "viewer")
    log_in("vera")
    page.goto(f"/releases/{release.pk}/")
    cases = (
        [(name, value) for name, value, _ in FIGURES]
        + [(name, value) for name in JS_NAMES for value in VALUES]
        + [("ratio", value) for value in RATIOS]
    )
    shown = page.evaluate(
        "cases => cases.map(([name, value]) => window.graylaneNumbers[name](value))",
        [[JS_NAMES[name], value] for name, value in cases],
    )
    assert shown == [getattr(display, name)(value) for name, value in cases]


def live_release_page(page, make_role_user, log_in):
    """The page of an analysed release, open as vera, and a function that sends it a
    `release` message with an event of `kind` and `detail` over its live socket."""
    release = make_analysed_release()
    make_role_user("vera", "viewer")
    log_in("vera")
    sockets = []
    # No server behind the release page's socket: the test sends.
    page.route_web_socket("**/ws/live/", lambda socket: sockets.append(socket))
    page.goto(f"/releases/{release.pk}/")
    for _ in range(100):
        if sockets:
            break
        page.wait_for_timeout(50)
    fields = ReleaseEventSerializer(release.events.get(kind="analysis")).data

    def send(kind: str, detail: dict) -> None:
        message = events.ReleaseChanged(
            release=dict(ReleaseSerializer(release).data),
            event={**fields, "kind": kind, "detail": detail},
        ).as_json()
        sockets[0].send(json.dumps(message, default=str))

    return send


def test_a_live_timeline_row_shows_rounded_figures(page, make_role_user, log_in):
    send = live_release_page(page, make_role_user, log_in)
    send("analysis", {**ANALYSIS, "test": {
        "increase_points": 1.4987, "likelihood_ratio": 46.31, "p_value": 0.00004}})  # fmt: skip
    rows = page.locator('#release-timeline tr[data-kind="analysis"]')
    rows.nth(1).wait_for()
    cells = rows.first.locator("td").all_text_contents()
    assert cells[1:2] + cells[3:6] == [
        "analysis healthy", "300 req, 33.3 %", "1200 req, 0.5 %", "+1.5 pts, ratio 46, p<0.001"
    ]  # fmt: skip


def test_a_live_insufficient_data_row_names_its_kind_once(page, make_role_user, log_in):
    send = live_release_page(page, make_role_user, log_in)
    send("insufficient_data", INSUFFICIENT)
    row = page.locator('#release-timeline tr[data-kind="insufficient_data"]')
    assert row.locator("td").nth(1).text_content() == "insufficient data"
