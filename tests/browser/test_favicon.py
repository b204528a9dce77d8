"""A page load logs no error in the browser's console: the icon the page names is there,
and so is /favicon.ico (where browsers look when a page names none)."""

import pytest

from tests.browser.conftest import PASSWORD

pytestmark = pytest.mark.browser


def test_a_page_load_logs_no_console_error(page, make_role_user):
    make_role_user("vera", "viewer")
    errors, icons = [], []
    page.on("console", lambda message: message.type == "error" and errors.append(message.text))
    page.on("response", lambda answer: "favicon" in answer.url and icons.append(answer.status))
    # Signed in straight to a page without a live socket, which the test server does not serve.
    page.goto("/accounts/login/?next=/revisions/")
    page.fill("#id_username", "vera")
    page.fill("#id_password", PASSWORD)
    with page.expect_navigation():
        page.click("button[type=submit]")
    page.wait_for_timeout(300)  # the icon is fetched after the load
    assert errors == []
    assert icons and set(icons) == {200}
    href = page.locator('link[rel="icon"]').get_attribute("href")
    assert page.request.get(href).status == 200
    assert page.request.get("/favicon.ico").status == 200  # after the redirect
