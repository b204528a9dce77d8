"""The pages work under the Content-Security-Policy (no inline script or style; the `page`
fixture fails a test on anything the policy blocked), the API docs included."""

import re

import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.browser


def test_the_api_docs_render_under_the_policy(page):
    response = page.goto("/api/docs/")
    assert "script-src 'self'" in response.headers["content-security-policy"]
    # Swagger UI built the page from the schema: its script ran, from a URL of ours.
    expect(page.locator(".swagger-ui .info .title")).to_contain_text("Graylane API")
    expect(page.locator(".opblock-summary-path").first).to_be_visible()


def test_an_inline_script_would_be_blocked(page, live_server):
    # The fixture's check is not vacuous: the policy really blocks inline script here.
    page.goto("/accounts/login/")
    with page.expect_console_message(lambda message: "inline script" in message.text):
        page.evaluate(
            "() => { const s = document.createElement('script');"
            " s.textContent = 'window.ran = true'; document.body.appendChild(s); }"
        )
    assert page.evaluate("() => window.ran") is None
    assert any("inline script" in text for text in page.blocked_by_csp), page.blocked_by_csp
    page.blocked_by_csp.clear()  # expected here


def test_the_login_page_shows_a_lockout(page, live_server, make_role_user, settings):
    settings.AXES_ENABLED = True
    make_role_user("olga", "operator")
    page.goto("/accounts/login/")
    for _ in range(5):
        page.fill("#id_username", "olga")
        page.fill("#id_password", "not-her-password")
        page.click("button[type=submit]")
    expect(page.locator(".error-box")).to_contain_text(
        re.compile(r"Too many failed sign-ins .* locked for 15 minutes")
    )
