"""Release bundles in the browser: an operator makes one from the releases page, starts it
from its page, sees it follow a release of it paused through the API (the page reloads on
the live event, in the real ASGI server), then rolls the bundle back."""

import httpx
import pytest

from accounts.models import ApiToken
from policy.services import update_policy
from registry_sync.models import Instance, Service
from releases.models import Release

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # a uvicorn of its own (asgi_server)


@pytest.fixture
def server_url(asgi_server):
    return asgi_server.url


def states_shown(page):
    return page.locator("#bundle-releases td .release-state").all_text_contents()


def test_make_a_bundle_start_it_follow_it_and_roll_it_back(
    page, asgi_server, make_role_user, log_in, screenshot
):
    for name in ("order-app", "user-app"):
        service = Service.objects.create(name=name)
        Instance.objects.create(
            service=service, instance_id=f"{name}-v2", host="10.0.0.2", port=7202, version="V2"
        )
    update_policy(
        {"enabled": True, "routing": True},
        partial=True,
        actor="setup",
        source="api",
        expected_revision=None,
    )
    _, token = ApiToken.objects.issue(make_role_user("olga", "operator"))
    # The bundle's actions ask first (test_bundle_confirm.py): this operator agrees.
    page.on("dialog", lambda dialog: dialog.accept())
    log_in("olga")
    page.goto("/releases/")
    page.fill("#id_bundle-name", "checkout")
    page.fill("#id_bundle-releases", "order-app V2\nuser-app V2")
    page.fill("#id_bundle-steps", "targeted, 50, 100")
    # Intervals longer than the test: no analysis changes a state behind its back.
    page.fill("#id_bundle-interval_s", "300")
    with page.expect_navigation():
        page.click("#bundle-form button[type=submit]")
    assert page.locator("#bundle-state").text_content() == "pending"
    assert page.locator("#bundle-releases td:nth-child(3)").all_text_contents() == [
        "order-app",
        "user-app",
    ]

    with page.expect_navigation():
        page.click('#bundle-actions button[data-action="start"]')
    assert page.locator("#bundle-state").text_content() == "running"
    assert states_shown(page) == ["running", "running"]
    assert page.locator('#bundle-actions form[data-action="start"]').count() == 0
    screenshot("bundle-running")

    user_app = Release.objects.get(service="user-app")
    with page.expect_navigation(timeout=10_000):
        paused = httpx.post(
            f"{asgi_server.url}/api/v1/releases/{user_app.pk}/pause/",
            headers={"Authorization": f"Token {token}"},
        )
        assert paused.status_code == 200, paused.text
    assert page.locator("#bundle-state").text_content() == "mixed"
    assert states_shown(page) == ["running", "paused"]
    assert page.locator('#bundle-actions form[data-action="pause"]').count() == 0

    with page.expect_navigation():
        page.click('#bundle-actions button[data-action="rollback"]')
    assert "rollback done, now rolled_back" in page.locator(".flash").first.text_content()
    assert states_shown(page) == ["rolled_back", "rolled_back"]
    assert page.locator('#bundle-timeline tr[data-kind="rolled_back"]').count() == 2
    assert page.locator("#bundle-actions form").count() == 0
    screenshot("bundle-rolled-back")
    page.goto("/releases/")
    assert page.locator("#bundles tbody tr .release-state").text_content() == "rolled_back"
    screenshot("releases-with-bundles")
