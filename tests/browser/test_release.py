"""Issue 14 in the browser: an operator starts a release from the releases page, watches
its steps advance and its timeline fill without a reload (the analysis runs in the real
ASGI server's beat, on metrics a gateway reports through the ingestion API), then presses
Rollback."""

import pytest

from gateways.models import Gateway
from policy.services import update_policy
from registry_sync.models import Instance, Service
from releases.models import Release
from tests.browser.test_live_charts import Traffic

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # a uvicorn of its own (asgi_server)


@pytest.fixture
def server_url(asgi_server):
    return asgi_server.url


def test_start_a_release_watch_it_advance_and_roll_it_back(
    page, asgi_server, make_role_user, log_in, screenshot
):
    service = Service.objects.create(name="user-app")
    Instance.objects.create(
        service=service, instance_id="user-app-v2", host="10.0.0.2", port=7202, version="V2"
    )
    update_policy(
        {"enabled": True, "routing": True},
        partial=True,
        actor="setup",
        source="api",
        expected_revision=None,
    )
    make_role_user("olga", "operator")
    _, gateway_token, _ = Gateway.objects.create_with_credentials(name="edge", mode=Gateway.PULL)
    with Traffic(asgi_server.url, "edge", gateway_token) as traffic:
        log_in("olga")
        page.goto("/releases/")
        page.fill("#id_service", "user-app")
        page.fill("#id_to_version", "V2")
        page.fill("#id_steps", "targeted, 10, 25, 50, 75, 100")
        page.fill("#id_interval_s", "5")
        page.fill("#id_min_requests", "50")
        page.fill("#id_deadline_s", "120")
        with page.expect_navigation():
            page.click("#release-form button[type=submit]")
        assert page.locator("#release-state").text_content() == "running"
        assert page.locator("#release-steps li.current").text_content() == "targeted users"
        page.evaluate("window.notReloaded = true")

        # Healthy figures for both versions: the analysis advances a step per interval.
        page.locator('#release-steps li[data-step="2"].current').wait_for(timeout=25_000)
        assert page.locator("#release-steps li.done").count() == 2
        rows = page.locator('#release-timeline tr[data-kind="analysis"]')
        assert rows.count() >= 2
        assert "healthy" in rows.first.text_content()
        assert "req" in rows.first.text_content()
        # Each interval's checks, added live: the error-rate test's figure and verdict.
        assert rows.first.locator('[data-metric="errors"][data-verdict="pass"]').count() == 1
        assert page.locator('#release-timeline tr[data-kind="advanced"]').count() >= 2
        assert page.evaluate("window.notReloaded") is True
        assert page.locator('#release-actions form[data-action="start"]').is_hidden()
        screenshot("release-advancing")

        page.once("dialog", lambda dialog: dialog.accept())  # "Roll back release 1 ...?"
        with page.expect_navigation():
            page.click('#release-actions button[data-action="rollback"]')
        assert page.locator("#release-state").text_content() == "rolled_back"
        assert page.locator('#release-actions form[data-action="rollback"]').is_hidden()
        assert page.locator('#release-timeline tr[data-kind="rolled_back"]').count() == 1
        assert "rolled_back" in page.locator(".messages, body").first.text_content()
    assert not traffic.failures, traffic.failures
    assert Release.objects.get().state == "rolled_back"
