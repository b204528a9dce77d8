"""Issue 24 in the browser: an operator makes a release with a latency bound and a start
time from the releases page's form (a malformed custom metric is refused on its field
first), sees the bound in the release page's analysis and the time it starts, and presses
Start now."""

from datetime import UTC, datetime, timedelta

import pytest

from releases.models import Release

pytestmark = pytest.mark.browser


@pytest.mark.usefixtures("fleet")
def test_a_scheduled_release_with_a_latency_bound_from_the_form(
    page, make_role_user, log_in, screenshot
):
    make_role_user("olga", "operator")
    log_in("olga")
    page.goto("/releases/")
    page.fill("#id_service", "user-app")
    page.fill("#id_to_version", "V2")
    page.fill("#id_steps", "10, 50, 100")
    page.fill("#id_max_p95_increase_ms", "30")
    page.fill("#id_metrics", "queue | max(queue_depth)")
    at = (datetime.now(UTC) + timedelta(days=1)).replace(second=0, microsecond=0)
    page.fill("#id_start_at", at.strftime("%Y-%m-%dT%H:%M"))
    with page.expect_navigation():
        page.click("#release-form button[type=submit]")
    error = page.locator(".field.has-error:has(#id_metrics) .field-error")
    assert error.text_content().startswith("Line 1: 'queue | max(queue_depth)' is not")
    assert page.input_value("#id_max_p95_increase_ms") == "30"
    assert not Release.objects.exists()
    screenshot("release-form-refused")

    page.fill("#id_metrics", "")
    with page.expect_navigation():
        page.click("#release-form button[type=submit]")
    assert page.locator("#release-state").text_content() == "scheduled"
    assert (
        "p95 at most 30.0 ms above prod's"
        in page.locator(".card p.muted.small").first.text_content()
    )
    assert page.locator("#release-scheduled-at").text_content() == f"{at:%Y-%m-%d %H:%M:%S} UTC"
    assert page.locator("#release-schedule").is_visible()
    screenshot("release-scheduled")

    page.once("dialog", lambda dialog: dialog.accept())  # "Start release 1 ...?"
    with page.expect_navigation():
        page.click('#release-actions button[data-action="start"]')
    assert page.locator("#release-state").text_content() == "running"
    assert page.locator("#release-schedule").is_hidden()
    release = Release.objects.get()
    assert (release.state, release.analysis["max_p95_increase_ms"]) == ("running", 30.0)
