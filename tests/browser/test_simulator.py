import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.browser


def simulate(page, **fields):
    form = page.locator("#simulate-form")
    for name in ("path", "header_name", "header_value", "ip", "city", "user"):
        form.locator(f"[name={name}]").fill(fields.get(name, ""))
    with page.expect_navigation():
        form.locator("button[type=submit]").click()


def test_simulator_with_the_seed_header_rule(page, seed_policy, make_role_user, log_in, screenshot):
    make_role_user("vera", "viewer")
    log_in("vera")
    page.goto("/simulate/")
    expect(page.locator("#simulation-result")).to_contain_text("Fill in a request")

    simulate(page, header_name="gray", header_value="gray-996")
    result = page.locator("#simulation-result")
    expect(result.locator(".flag")).to_have_text("GRAY")
    expect(result.locator("#matched")).to_have_text("header")
    expect(result).to_contain_text(str(seed_policy.revision))
    screenshot("simulator-gray")

    simulate(page, header_name="gray", header_value="gray-997", ip="203.0.113.9", city="nowhere")
    expect(result.locator(".flag")).to_have_text("PROD")
    expect(result.locator("#matched")).to_have_text("none")
