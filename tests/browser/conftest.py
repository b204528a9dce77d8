"""Fixtures for the browser tests: the real Debian chromium, driven by Playwright's sync API,
against pytest-django's `live_server` (a real HTTP server on loopback, in a thread) or, for
tests that need websockets, the real ASGI server (`asgi_server`, uvicorn in a subprocess).

Without /usr/bin/chromium (or, for the accessibility test, axe-core in node_modules/) the tests
skip, unless REQUIRE_BROWSER=true (CI): then they fail, so a CI machine that lost its browser
cannot pass by skipping everything.
"""

import os
import re
import time
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection
from playwright.sync_api import sync_playwright

from call_graph import services as call_graph
from demo.management.commands.demo_setup import DEMO_LANES, DEMO_POLICY
from gateways.models import Gateway
from metrics import rollups
from metrics.samples import Sample
from policy.change_control import DraftPending, set_protected
from policy.publishing import load_state
from policy.services import create_lane, set_service_versions, update_policy
from registry_sync.models import Instance, Service
from releases import services as releases
from releases.bundles import create_bundle
from releases.tests.conftest import fleet  # noqa: F401  (a fixture these tests share)
from testing import processes

CHROMIUM = "/usr/bin/chromium"
# Without the networking flags the closed network makes Chromium slow to start; --no-sandbox
# because CI runs as root (.ci/run).
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
PASSWORD = "browser-test-pw"
SHOTS_DIR = Path(os.environ.get("GRAYLANE_SHOTS_DIR", "/tmp/graylane-shots"))
# Any URL that is not on loopback: the pages must not reach out (fonts, CDNs, analytics).
NOT_LOOPBACK = re.compile(r"^(?!(https?|wss?)://(127\.0\.0\.1|localhost|\[::1\])[:/]).+://")
# axe-core, installed by `npm ci` from package-lock.json (Makefile, .ci/run); only the tests
# load it, into the page under test: the app never serves it.
AXE_CORE = Path(settings.BASE_DIR) / "node_modules" / "axe-core" / "axe.min.js"
STEPS = [{"targeted": True}, {"percent": 25}, {"percent": 100}]
ANALYSIS = {"interval_s": 300, "min_requests": 50}


def _browser_unavailable(reason: str) -> None:
    if os.environ.get("REQUIRE_BROWSER") == "true":
        pytest.fail(f"{reason}, and REQUIRE_BROWSER=true: the browser tests must run.")
    pytest.skip(reason)


@pytest.fixture(scope="package")
def browser():
    """One headless chromium for all the browser tests.

    Package scope, not session scope: while Playwright runs, its sync API keeps an asyncio
    loop marked as running in this thread, which breaks sync ORM calls and async tests.
    pytest-django runs the tests without a database after the transactional ones (these),
    so a session-scoped Playwright would still be running under all of them."""
    if not os.path.exists(CHROMIUM):
        _browser_unavailable(f"{CHROMIUM} is missing (apt-get install chromium)")

    # Django refuses synchronous ORM calls from a thread with a running event loop
    # (SynchronousOnlyOperation), and Playwright's loop counts as running in this thread
    # from start() to stop(). The tests call the ORM directly (set-up, the change made
    # behind the browser's back, the database flush after each test), never from async
    # code, so allow it for exactly as long as Playwright runs.
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    playwright = sync_playwright().start()
    try:
        chromium = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
        )
        try:
            yield chromium
        finally:
            chromium.close()
    finally:
        playwright.stop()
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


@pytest.fixture
def server_url(live_server):
    """The server `page` browses: pytest-django's live server (WSGI, no websockets). A test
    module that needs the live websocket overrides this with `asgi_server.url`."""
    return live_server.url


@pytest.fixture
def asgi_server_env(tmp_path):
    """Environment of `asgi_server` on top of testing.processes.django_env. REDIS_URL="" forces
    the default mode even where CI sets REDIS_URL: Celery worker + beat as threads of the
    server process, in-memory broker and channel layer, so jobs of the server reach its
    websockets. The test settings, not graylane.settings: the users the tests create have
    MD5 password hashes (the test PASSWORD_HASHERS), which graylane.settings cannot check,
    so logging in would fail. Override to change."""
    return {
        "DJANGO_SETTINGS_MODULE": "graylane.test_settings",
        "REDIS_URL": "",
        "IN_PROCESS_JOBS": "true",
        "DRAIN_SECONDS": "1.5",
        "GRAYLANE_VAR_DIR": str(tmp_path / "asgi-var"),  # the beat schedule file goes here
        "LOG_LEVEL": "INFO",
    }


@pytest.fixture
def asgi_server(transactional_db, asgi_server_env):
    """uvicorn serving graylane.asgi on a free loopback port, against the test database:
    `.url` (http://127.0.0.1:PORT, an allowed host, so the websocket's Origin passes),
    `.log()` (its output). transactional_db: what the test writes is committed, so the
    server sees it; the server is stopped before that database is flushed."""
    env = processes.django_env(processes.database_url(connection.settings_dict), **asgi_server_env)
    with processes.AsgiServer(env) as server:
        yield server


@pytest.fixture
def axe_core() -> Path:
    """The path of axe-core's script, for `page.add_script_tag(path=...)`."""
    if not AXE_CORE.exists():
        _browser_unavailable(f"{AXE_CORE} is missing (npm ci)")
    return AXE_CORE


@pytest.fixture
def context_options() -> dict:
    """More options of the browser context that `page` opens; a test module overrides it."""
    return {}


@pytest.fixture
def page(browser, server_url, transactional_db, context_options):
    """A fresh context (no cookies) and page on `server_url`; fails the test if a page
    raised a JavaScript error or tried to leave loopback."""
    context = browser.new_context(
        base_url=server_url, viewport={"width": 1280, "height": 900}, **context_options
    )
    context.set_default_timeout(5_000)
    outside = []

    def block(route):
        outside.append(route.request.url)
        route.abort()

    context.route(NOT_LOOPBACK, block)
    page = context.new_page()
    js_errors = []
    page.on("pageerror", lambda error: js_errors.append(str(error)))
    # What the Content-Security-Policy blocked (an inline script or style, eval, ...).
    blocked: list[str] = []
    page.blocked_by_csp = blocked  # type: ignore[attr-defined]  # for a test expecting some
    page.on(
        "console",
        lambda message: "Content Security Policy" in message.text and blocked.append(message.text),
    )
    try:
        yield page
    finally:
        context.close()
    assert not outside, f"requests outside loopback: {outside}"
    assert not js_errors, f"JavaScript errors: {js_errors}"
    assert not blocked, f"blocked by the Content-Security-Policy: {blocked}"


@pytest.fixture
def make_role_user(transactional_db):
    """`make_role_user("olga", "operator")`: a user in that role's group, password PASSWORD.

    get_or_create: the groups come from a data migration, and the flush after every
    transactional test (these all are) deletes them."""
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group

    def make(username: str, role: str):
        user = get_user_model().objects.create_user(username=username, password=PASSWORD)
        user.groups.add(Group.objects.get_or_create(name=role)[0])
        return user

    return make


@pytest.fixture
def log_in(page):
    """Sign in through the login form, as a person would."""

    def sign_in(username: str, password: str = PASSWORD) -> None:
        page.goto("/accounts/login/")
        page.fill("#id_username", username)
        page.fill("#id_password", password)
        with page.expect_navigation():
            page.click("button[type=submit]")

    return sign_in


@pytest.fixture
def screenshot(page):
    """Save a full-page screenshot for a person to look at (not an assertion)."""

    def take(name: str) -> Path:
        SHOTS_DIR.mkdir(parents=True, exist_ok=True)
        path = SHOTS_DIR / f"{name}.png"
        # Assertions pass as soon as the HTML is there; the stylesheet may still be on its
        # way, and a full-page shot measures the page at that moment.
        page.wait_for_load_state("load")
        page.screenshot(path=str(path), full_page=True)
        return path

    return take


@pytest.fixture
def seed_policy(transactional_db):
    """The reference design's gray rules (docs/gray-release-design.md): switch on, header
    `gray: gray-996`."""
    from policy.services import update_policy

    return update_policy(
        {"enabled": True, "header": {"name": "gray", "value": "gray-996"}},
        partial=True,
        actor="seed",
        source="api",
        expected_revision=None,
        comment="The reference design's header rule.",
    ).state


@pytest.fixture
def demo_data(transactional_db):
    """The demo's fleet and policy (user-app calls order-app, V1 prod, V2 gray, V3 in the
    lanes), a gateway, traffic and call edges, a running release, a bundle, and a draft
    waiting on a protected service; the revisions and audit entries they make. Returns the
    pages of one of each (service, release, revision, bundle, lane, draft) by name."""
    for name in ("user-app", "order-app", "pay-app"):
        service = Service.objects.create(name=name)
        for n, version in enumerate(("V1", "V2", "V3")):
            Instance.objects.create(service=service, version=version, state=Instance.UP,
                                    instance_id=f"10.0.{n}.1#7201#DEFAULT#DEFAULT_GROUP@@{name}",
                                    host=f"10.0.{n}.1", port=7201)  # fmt: skip
    update_policy(DEMO_POLICY, partial=True, actor="demo-setup", source="api",
                  expected_revision=None)  # fmt: skip
    for lane, body in DEMO_LANES.items():
        create_lane(lane, body, actor="demo-setup", source="api", comment="Demo lane.")
    Gateway.objects.create_with_credentials(name="demo-gateway", mode=Gateway.PULL)
    now = int(time.time())
    rollups.add(
        [
            Sample(service, version, ts, 40, errors, 12.5, lane)
            for ts in range(now - 120, now, 10)
            for service in ("user-app", "order-app")
            for version, errors, lane in (("V1", 0, ""), ("V2", 1, "gray"), ("V3", 0, "feature-x"))
        ]
    )
    call_graph.record(
        [
            {
                "ts": now - 30,
                "caller": "user-app",
                "caller_version": version,
                "callee": "order-app",
                "callee_version": version,
                "lane": "",
                "total": 90,
                "errors": 1,
            }  # fmt: skip
            for version in ("V1", "V2")
        ]
    )
    release = releases.create_release(service="user-app", to_version="V2", from_version=None,
                                      steps=STEPS, analysis_settings=ANALYSIS, actor="admin",
                                      source="ui")  # fmt: skip
    releases.act(release.pk, "start", actor="admin", source="ui")
    releases.act(release.pk, "pause", actor="admin", source="ui")
    bundle = create_bundle(name="checkout", steps=STEPS, analysis_settings=ANALYSIS,
                           actor="admin", source="ui",
                           members=[{"service": "order-app", "to_version": "V3"},
                                    {"service": "pay-app", "to_version": "V2"}])  # fmt: skip
    set_protected(Service.objects.get(name="pay-app"), True, actor="admin", source="ui")
    with pytest.raises(DraftPending) as held:
        set_service_versions("pay-app", {"percent": 10}, actor="olga", source="ui",
                             comment="Ten percent of pay-app's traffic to V2.")  # fmt: skip
    return {
        "service": "/services/user-app/",
        "release": f"/releases/{release.pk}/",
        "revision": f"/revisions/{load_state().revision}/",
        "bundle": f"/releases/bundles/{bundle.pk}/",
        "lane": f"/lanes/{next(iter(DEMO_LANES))}/edit/",
        "draft": f"/drafts/{held.value.draft.pk}/",
    }


@pytest.fixture
def admin_pages(page, demo_data, make_role_user, log_in) -> list[tuple[str, str]]:
    """Logged in as an admin, with the demo's data: (name, URL) of every page the navigation
    links to, then of the demo_data pages."""
    make_role_user("ada", "admin")
    log_in("ada")
    page.goto("/")
    links = [
        (a.text_content(), a.get_attribute("href")) for a in page.locator("header nav a").all()
    ]
    assert len(links) >= 10
    return links + [(f"the {name} page", url) for name, url in demo_data.items()]
