"""Issue 26, service graph: the overview draws the demo's user-app → order-app calls as the
service SDK reports them (dataplane/sdk/call_edges.py, as demo/service.py does), follows new
reports without a reload, leads from a service's box to its page by mouse and by keyboard,
and says so when no calls were seen."""

import asyncio
import re
from concurrent.futures import ThreadPoolExecutor

import pytest
from playwright.sync_api import expect

from accounts.models import ApiToken
from dataplane.sdk.call_edges import CallEdgeReporter
from registry_sync.models import Service

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # a uvicorn of its own (asgi_server)

EDGE = '#service-graph .graph-edge[data-caller="user-app"][data-callee="order-app"]'
LABEL = '#service-graph .graph-label[data-caller="user-app"][data-callee="order-app"]'


@pytest.fixture
def server_url(asgi_server):
    """Pages from uvicorn: the live websocket."""
    return asgi_server.url


@pytest.fixture
def report(asgi_server, make_role_user):
    """`report("V2", "gray", calls=100, errors=20)`: user-app at that version counts that many
    calls to order-app and its SDK reporter posts them, as a demo instance does."""
    _, token = ApiToken.objects.issue(make_role_user("demo-fleet", "service"))

    async def send(version, lane, calls, errors):
        reporter = CallEdgeReporter(asgi_server.url, token, service="user-app", version=version)
        for n in range(calls):
            reporter.count("order-app", "V1", lane, error=n < errors)
        assert await reporter.send()
        await reporter.aclose()

    def run(version, lane, calls, errors=0):
        # A thread of its own: Playwright's event loop counts as running in this one.
        with ThreadPoolExecutor(1) as thread:
            thread.submit(asyncio.run, send(version, lane, calls, errors)).result(timeout=30)

    return run


def test_the_graph_follows_reported_calls_and_leads_to_the_service_page(
    page, log_in, make_role_user, report, screenshot
):
    for name in ("user-app", "order-app"):
        Service.objects.create(name=name)
    report("V1", None, calls=100)
    make_role_user("vera", "viewer")
    log_in("vera")
    page.goto("/")

    edge = page.locator(LABEL)
    expect(edge.locator(".graph-total")).to_have_text(re.compile(r"^\S+/s, 100 % ok$"))
    expect(edge.locator("tspan").nth(1)).to_have_text(re.compile(r"^V1: \S+/s, 100 %$"))
    graph = page.locator("#service-graph svg")
    expect(graph).to_have_attribute("role", "group")
    expect(page.locator("#service-graph-title")).to_contain_text("user-app → order-app")
    page.evaluate("window.sameDocument = true")  # gone if the page reloads

    report("V2", "gray", calls=100, errors=20)
    expect(edge.locator(".graph-total")).to_have_text(re.compile(r"^\S+/s, 90 % ok$"))
    expect(edge.locator("tspan").nth(2)).to_have_text(re.compile(r"^V2 · gray: \S+/s, 80 %$"))
    expect(page.locator(EDGE)).to_have_class(re.compile(r"\bgraph-failing\b"))
    page.click("#service-graph summary")
    rows = page.locator('#service-graph tr[data-caller="user-app"]')
    expect(rows).to_have_count(3)
    expect(rows.nth(0)).to_contain_text("all")
    expect(rows.nth(0).locator('[data-label="Calls"]')).to_have_text("200")
    assert page.evaluate("window.sameDocument") is True

    # A redrawn graph keeps the table open.
    report("V1", None, calls=50)
    expect(rows.nth(0).locator('[data-label="Calls"]')).to_have_text("250")
    expect(page.locator("#service-graph details")).to_have_attribute("open", "")
    assert page.evaluate("window.sameDocument") is True
    screenshot("overview-service-graph")

    page.click('#service-graph a.graph-node[data-service="user-app"]')
    expect(page).to_have_url(re.compile(r"/services/user-app/$"))
    expect(page.locator("h1")).to_contain_text("user-app")

    # By keyboard: Tab reaches order-app's box, Enter opens its page.
    page.goto("/")
    for _ in range(80):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.getAttribute('data-service')") == "order-app":
            break
    else:
        pytest.fail("Tab never reached order-app's box in the service graph")
    page.keyboard.press("Enter")
    expect(page).to_have_url(re.compile(r"/services/order-app/$"))


def test_without_calls_the_graph_says_none_were_seen_until_some_are(
    page, make_role_user, log_in, report
):
    make_role_user("vera", "viewer")
    log_in("vera")
    page.goto("/")
    expect(page.locator("#service-graph .graph-empty")).to_have_text(
        re.compile(r"^No calls between services in the last 5 minutes\.")
    )
    expect(page.locator("#service-graph svg")).to_have_count(0)

    report("V1", None, calls=10)
    expect(page.locator(LABEL).locator(".graph-total")).to_have_text(re.compile(r", 100 % ok$"))
    expect(page.locator("#service-graph .graph-empty")).to_have_count(0)
