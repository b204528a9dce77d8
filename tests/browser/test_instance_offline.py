"""Issue 3: an operator takes an instance out of traffic from the service page and watches it
drain, then go offline, without reloading: the OFFLINE comes over the live websocket from
the Celery task `finish_drain`, run by the worker thread inside the real ASGI server."""

import json
import re
import time

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from registry_sync.models import Instance, Service

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # a uvicorn of its own (asgi_server)

# Long enough that the page is seen DRAINING (and photographed) before OFFLINE arrives, on
# a loaded machine too: at 1.5 s a busy CI machine sometimes saw OFFLINE first.
DRAIN_SECONDS = 8.0
# How late OFFLINE may reach the page after the window: a broadcast over the websocket.
LIVE_WITHIN = 4.0


@pytest.fixture
def server_url(asgi_server):
    """This module's pages come from uvicorn (websockets), not from the WSGI live server."""
    return asgi_server.url


@pytest.fixture
def asgi_server_env(asgi_server_env):
    return {**asgi_server_env, "DRAIN_SECONDS": str(DRAIN_SECONDS)}


@pytest.fixture
def user_app(transactional_db):
    """Service user-app, no registry (take_offline then tells no registry), two instances UP."""
    service = Service.objects.create(name="user-app")
    now = timezone.now()
    for host, version in (("10.0.0.1", "V1"), ("10.0.0.2", "V2")):
        Instance.objects.create(
            service=service,
            instance_id=f"{host}#7201#DEFAULT#DEFAULT_GROUP@@user-app",
            host=host,
            port=7201,
            version=version,
            state=Instance.UP,
            last_seen=now,
        )
    return service


def server_log_tail(server) -> str:
    return "The server's log ends with:\n" + server.log()[-3000:]


def instance_row(page, address: str):
    return page.locator("#instances tbody tr", has=page.locator("code", has_text=address))


def test_take_offline_drains_then_goes_offline_live_then_back_online(
    page, asgi_server, make_role_user, log_in, user_app, screenshot
):
    make_role_user("olga", "operator")
    dialogs = []

    def accept(dialog):
        dialogs.append(dialog.message)
        dialog.accept()

    page.on("dialog", accept)
    frames = []  # (monotonic time, message) of every frame the page's live sockets received
    page.on(
        "websocket",
        lambda ws: ws.on(
            "framereceived", lambda payload: frames.append((time.monotonic(), json.loads(payload)))
        ),
    )

    log_in("olga")
    page.goto("/services/user-app/")
    first, second = instance_row(page, "10.0.0.1:7201"), instance_row(page, "10.0.0.2:7201")
    state = first.locator('[data-field="state"]')
    expect(page).to_have_title("user-app · Graylane")
    expect(state).to_have_text("UP")
    expect(second.locator('[data-field="state"]')).to_have_text("UP")
    offline_button = first.get_by_role("button", name="Take offline")
    online_button = first.get_by_role("button", name="Bring online")
    expect(online_button).to_be_hidden()

    # The form posts and comes back to this page (a navigation): it shows DRAINING at once.
    clicked_at = time.monotonic()
    with page.expect_navigation() as navigation:
        offline_button.click()
    assert navigation.value.status == 200, server_log_tail(asgi_server)
    assert dialogs == [
        f"Take 10.0.0.1:7201 out of traffic? It drains for {DRAIN_SECONDS} s, then goes offline."
    ]
    expect(page.locator(".flash")).to_contain_text("10.0.0.1:7201 is draining")
    expect(state).to_have_text("DRAINING")
    expect(state).to_have_class(re.compile(r"\bstate-draining\b"))
    expect(offline_button).to_be_hidden()
    expect(online_button).to_be_visible()
    assert Instance.objects.get(host="10.0.0.1").state == Instance.DRAINING
    # From here on the page must not reload: a reload would lose this marker.
    page.evaluate("window.__marker = 1")
    table_width = page.locator("#instances").bounding_box()["width"]
    screenshot("service-draining")
    # The shot is of the draining page only if OFFLINE had not arrived yet.
    assert state.text_content() == "DRAINING", "OFFLINE came before the screenshot was taken"

    # finish_drain runs DRAIN_SECONDS after the click, in the server's worker thread, and its
    # broadcast reaches this page's websocket.
    expect(state).to_have_text("OFFLINE", timeout=(DRAIN_SECONDS + LIVE_WITHIN) * 1000)
    expect(state).to_have_class(re.compile(r"\bstate-offline\b"))
    expect(page.locator(".flash")).to_have_text("10.0.0.1:7201 is offline: out of traffic.")
    assert page.evaluate("window.__marker") == 1, "the page reloaded"
    pushed = [(t, m) for t, m in frames if m.get("type") == "instance" and m["state"] == "OFFLINE"]
    assert [(m["service"], m["host"], m["port"]) for _, m in pushed] == [
        ("user-app", "10.0.0.1", 7201)
    ]
    # Not before the drain window is over, and promptly once it is.
    took = pushed[0][0] - clicked_at
    assert DRAIN_SECONDS <= took < DRAIN_SECONDS + LIVE_WITHIN, (
        f"OFFLINE {took:.2f} s after the click"
    )
    expect(online_button).to_be_visible()
    expect(offline_button).to_be_hidden()
    expect(second.locator('[data-field="state"]')).to_have_text("UP")
    # The live update renders the row as the server does, and the layout does not jump.
    expect(first.locator('[data-field="weight"]')).to_have_text("1.0")
    assert page.locator("#instances").bounding_box()["width"] == pytest.approx(table_width, abs=1)
    screenshot("service-offline-live")

    row = Instance.objects.get(host="10.0.0.1")
    assert (row.state, row.offline_intent, row.enabled) == (Instance.OFFLINE, True, False)
    assert Instance.objects.get(host="10.0.0.2").state == Instance.UP

    with page.expect_navigation() as navigation:
        online_button.click()
    assert navigation.value.status == 200, server_log_tail(asgi_server)
    assert dialogs[-1] == "Put 10.0.0.1:7201 back into traffic?"
    expect(page.locator(".flash")).to_contain_text("10.0.0.1:7201 is back in traffic")
    expect(state).to_have_text("UP")
    expect(state).to_have_class(re.compile(r"\bstate-up\b"))
    expect(offline_button).to_be_visible()
    expect(online_button).to_be_hidden()
    row.refresh_from_db()
    assert (row.state, row.offline_intent, row.enabled) == (Instance.UP, False, True)
