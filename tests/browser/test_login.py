import re

import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.browser


def test_operator_logs_in_and_lands_on_the_overview(page, live_server, make_role_user, screenshot):
    make_role_user("olga", "operator")

    page.goto("/")
    # Not signed in: the dashboard sends the browser to the login form.
    expect(page).to_have_url(re.compile(r"/accounts/login/\?next=/$"))

    page.fill("#id_username", "olga")
    page.fill("#id_password", "not-her-password")
    page.click("button[type=submit]")
    expect(page.locator(".error-box")).to_be_visible()
    expect(page.locator("header.topbar")).to_have_count(0)

    page.fill("#id_password", "browser-test-pw")
    page.click("button[type=submit]")
    expect(page).to_have_url(f"{live_server.url}/")
    expect(page.locator("h1")).to_have_text("Overview")
    expect(page.locator(".who")).to_contain_text("olga")
    expect(page.locator(".who .badge-role")).to_have_text("operator")
    expect(page.locator("nav a.active")).to_have_text("Overview")
    # The initial revision is live, and the tiles describe the default policy.
    expect(page.locator(".page-head")).to_contain_text("revision 1")
    expect(page.locator(".tile").first).to_contain_text("OFF")
    screenshot("overview")
