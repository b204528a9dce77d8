"""Issue 26: the overview reads in five seconds. Each service's state in one line (healthy,
gray worse, not enough data with its request count) following live traffic, and a badge for
each thing an operator must act on (a quarantined version, a paused release, a freeze window
in force, a failing gateway), each leading where it is acted on, gained without a reload."""

import re
from datetime import timedelta

import httpx
import pytest
from django.utils import timezone
from playwright.sync_api import expect

from accounts.models import ApiToken
from gateways import generation
from gateways.models import Gateway
from policy.freezes import create_freeze
from policy.publishing import load_state
from policy.services import quarantine_version
from registry_sync.models import Service
from releases.models import Release
from tests.browser.test_live_charts import Traffic

pytestmark = [pytest.mark.browser, pytest.mark.slow]

PHONE = {"width": 390, "height": 844}


def release(service: str, state: str) -> Release:
    return Release.objects.create(
        service=service, from_version="V1", to_version="V2", state=state,
        steps=[{"percent": 10}], analysis={"interval_s": 3600},
    )  # fmt: skip


def state_of(page, service: str):
    return page.locator(f'#service-states li[data-service="{service}"]')


class TestLive:
    @pytest.fixture
    def server_url(self, asgi_server):
        return asgi_server.url

    def test_states_follow_the_traffic_and_badges_come_without_a_reload(
        self, page, asgi_server, make_role_user, log_in
    ):
        load_state()
        Service.objects.create(name="user-app")
        Service.objects.create(name="quiet-app")
        running = release("user-app", "running")
        _, admin_key = ApiToken.objects.issue(make_role_user("ada", "admin"))
        admin = httpx.Client(
            base_url=asgi_server.url, headers={"Authorization": f"Token {admin_key}"}
        )
        make_role_user("vera", "viewer")
        _, gateway_token, _ = Gateway.objects.create_with_credentials(
            name="edge", mode=Gateway.PULL
        )
        with Traffic(asgi_server.url, "edge", gateway_token) as traffic, admin:
            log_in("vera")
            page.goto("/")
            page.evaluate("window.notReloaded = true")
            expect(page.locator("#needs-action")).to_have_text("Nothing needs action.")
            expect(state_of(page, "quiet-app").locator('[data-field="state"]')).to_have_text(
                "not enough data (0 requests in the last minute)"
            )
            expect(state_of(page, "user-app")).to_have_attribute(
                "data-state", "healthy", timeout=15_000
            )
            expect(state_of(page, "user-app").locator('[data-field="state"]')).to_have_text(
                "healthy"
            )

            answer = admin.post(f"/api/v1/releases/{running.pk}/pause/", json={})
            assert answer.status_code == 200, answer.text
            badge = page.locator('#needs-action [data-kind="release"]')
            expect(badge).to_have_text(f"release {running.pk} of user-app paused")
            expect(badge).to_have_attribute("href", f"/releases/{running.pk}/")

            now = timezone.now()
            answer = admin.post(
                "/api/v1/freezes/",
                json={
                    "starts_at": (now - timedelta(seconds=5)).isoformat(),
                    "ends_at": (now + timedelta(hours=1)).isoformat(),
                    "services": ["user-app"],
                    "reason": "Quarter close",
                },
            )
            assert answer.status_code == 201, answer.text
            freeze = page.locator('#needs-action [data-kind="freeze"]')
            expect(freeze).to_contain_text("user-app")
            expect(freeze).to_have_attribute("href", "/releases/#upcoming")

            traffic.errors["V2"] = 30
            expect(state_of(page, "user-app")).to_have_attribute(
                "data-state", "worse", timeout=15_000
            )
            expect(state_of(page, "user-app").locator('[data-field="state"]')).to_contain_text(
                "gray worse (−"
            )
            assert page.evaluate("window.notReloaded") is True
        assert not traffic.failures, traffic.failures


def test_each_thing_to_act_on_has_a_badge_leading_where_it_is_done(
    page, make_role_user, log_in, screenshot
):
    load_state()
    Service.objects.create(name="user-app")
    quarantine_version("user-app", "V3", actor="release", source="release")
    paused = release("order-app", "paused")
    now = timezone.now()
    create_freeze(
        starts_at=now - timedelta(minutes=1), ends_at=now + timedelta(hours=2), services=[],
        reason="Sale", actor="ada", source="api",
    )  # fmt: skip
    current = generation.bump("test")
    failing, _, _ = Gateway.objects.create_with_credentials(
        name="push-1", mode=Gateway.PUSH, acked_generation=current - 1
    )
    Gateway.objects.filter(pk=failing.pk).update(last_error="connection refused")
    make_role_user("olga", "operator")
    log_in("olga")
    page.set_viewport_size(PHONE)
    page.goto("/")
    badges = page.locator("#needs-action a.action-badge")
    expect(badges).to_have_text(
        [
            "V3 of user-app quarantined",
            "gateway push-1 failing",
            f"release {paused.pk} of order-app paused",
            f"freeze until {(now + timedelta(hours=2)).strftime('%H:%M')} UTC: every service",
        ]
    )
    for badge in badges.all():
        box = badge.bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"]
    screenshot("overview-needs-action-phone")
    page.locator('#needs-action [data-kind="gateway"]').click()
    expect(page).to_have_url(re.compile(r"/gateways/$"))
    expect(page.locator('tr[data-gateway="push-1"]')).to_contain_text("failing")
    page.go_back()
    page.locator('#needs-action [data-kind="quarantine"]').click()
    expect(page.locator("#quarantine")).to_contain_text("V3 quarantined")
    assert page.url.endswith("/services/user-app/#quarantine")
    expect(page.locator("#quarantine button", has_text="Lift quarantine")).to_be_visible()
