"""Issue 26, the service page live: the lifecycle timeline gains an instance's steps as the
instance reports them, without a reload."""

from datetime import UTC, datetime

import httpx
import pytest
from playwright.sync_api import expect

from accounts.models import ApiToken
from registry_sync.models import Service

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # a uvicorn of its own (asgi_server)


@pytest.fixture
def server_url(asgi_server):
    return asgi_server.url


def test_the_lifecycle_timeline_gains_a_step_without_a_reload(
    page, asgi_server, make_role_user, log_in
):
    Service.objects.create(name="user-app")
    _, fleet_key = ApiToken.objects.issue(make_role_user("fleet", "service"))
    make_role_user("vera", "viewer")
    log_in("vera")
    page.goto("/services/user-app/")
    page.evaluate("window.notReloaded = true")
    timeline = page.locator("#lifecycle")
    expect(timeline).to_contain_text("No lifecycle events reported.")

    def report(event: str) -> None:
        answer = httpx.post(
            asgi_server.url + "/api/v1/lifecycle/",
            json={
                "service": "user-app",
                "host": "10.0.0.5",
                "port": 7201,
                "event": event,
                "at": datetime.now(UTC).isoformat(),
            },
            headers={"Authorization": f"Token {fleet_key}"},
        )
        assert answer.status_code == 202, answer.text

    report("starting")
    row = timeline.locator("tbody tr", has_text="10.0.0.5:7201")
    expect(row.locator(".step-label")).to_have_text(["starting"])
    report("serving")
    expect(row.locator(".step-label")).to_have_text(["starting", "serving"])
    expect(row).to_contain_text("(running)")
    assert page.evaluate("window.notReloaded") is True
