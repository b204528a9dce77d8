"""Issue 24 in the browser: a release waits at its approval step; with four eyes on, an
operator other than its creator presses Approve on the release's page, and the page shows
it running at the next step, with who approved on the timeline. The releases page lists
what is coming: freeze windows and scheduled starts, soonest first."""

from datetime import timedelta

import pytest
from django.utils import timezone

from policy.models import Freeze
from releases import services
from releases.models import Release
from releases.tests.conftest import QUIET_ANALYSIS

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # a uvicorn of its own (asgi_server)


@pytest.fixture
def asgi_server_env(asgi_server_env):
    return {**asgi_server_env, "RELEASE_FOUR_EYES": "true"}


@pytest.fixture
def server_url(asgi_server):
    return asgi_server.url


@pytest.mark.usefixtures("fleet")
def test_another_operator_approves_a_step_from_the_release_page(
    page, asgi_server, make_role_user, log_in, screenshot, settings
):
    settings.RELEASE_FOUR_EYES = True  # here as in the server: olga's promote says so
    make_role_user("olga", "operator")
    make_role_user("anna", "operator")
    release = services.create_release(
        service="user-app",
        to_version="V2",
        from_version=None,
        steps=[{"targeted": True}, {"approval": True}, {"percent": 50}, {"percent": 100}],
        analysis_settings=QUIET_ANALYSIS,
        actor="olga",
        source="api",
    )
    services.act(release.pk, "start", actor="olga", source="api")
    services.act(release.pk, "promote", actor="olga", source="api")

    log_in("anna")
    page.goto(f"/releases/{release.pk}/")
    assert page.locator("#release-state").text_content() == "awaiting_approval"
    assert page.locator("#release-steps li.current").text_content() == "approval"
    waiting = page.locator('#release-timeline tr[data-kind="awaiting_approval"]')
    assert "other than olga" in waiting.text_content()
    assert page.locator('#release-actions form[data-action="promote"]').is_hidden()
    screenshot("release-awaiting-approval")

    with page.expect_navigation():
        page.click('#release-actions button[data-action="approve"]')
    assert "approve done, now running" in page.locator(".flash").first.text_content()
    assert page.locator("#release-state").text_content() == "running"
    assert page.locator("#release-steps li.current").text_content() == "50 %"
    assert page.locator("#release-steps li.done").count() == 2
    approved = page.locator('#release-timeline tr[data-kind="approved"]')
    assert "approved by anna" in approved.text_content()
    assert page.locator('#release-actions form[data-action="approve"]').is_hidden()
    screenshot("release-approved")
    assert (Release.objects.get().state, Release.objects.get().step) == ("running", 2)

    follow_up = services.create_release(
        service="user-app",
        to_version="V2",
        from_version=None,
        steps=[{"percent": 100}],
        analysis_settings=release.analysis,
        actor="anna",
        source="api",
    )
    at = timezone.now() + timedelta(hours=2)
    services.act(follow_up.pk, "start", actor="anna", source="api", at=at)
    freeze = Freeze.objects.create(
        starts_at=at - timedelta(hours=1),
        ends_at=at - timedelta(minutes=30),
        services=["user-app"],
        reason="Payroll run",
    )
    page.goto("/releases/")
    rows = page.locator("#upcoming tbody tr")
    assert rows.count() == 2
    assert rows.nth(0).get_attribute("data-freeze-id") == str(freeze.pk)
    assert "Payroll run" in rows.nth(0).text_content()
    assert rows.nth(1).get_attribute("data-release-id") == str(follow_up.pk)
    assert at.strftime("%Y-%m-%d %H:%M:%S") in rows.nth(1).text_content()
    screenshot("releases-upcoming")
