"""The overview shows the gateways (the demo gateway of `make run` among them) and follows
their status live: a pull gateway that polls and acks turns from pending to in_sync on the
open page, without a reload."""

import httpx
import pytest
from playwright.sync_api import expect

from gateways.models import Gateway

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # a uvicorn of its own (asgi_server)


@pytest.fixture
def server_url(asgi_server):
    """Pages from uvicorn: the live websocket."""
    return asgi_server.url


def test_the_overview_follows_a_gateway_into_sync(page, asgi_server, make_role_user, log_in):
    _, token, _ = Gateway.objects.create_with_credentials(name="demo-gateway", mode=Gateway.PULL)
    make_role_user("vera", "viewer")
    log_in("vera")
    page.goto("/")
    row = page.locator('#gateways tr[data-gateway="demo-gateway"]')
    expect(row.locator('[data-field="status"]')).to_have_text("pending")
    page.evaluate("window.sameDocument = true")  # gone if the page reloads

    auth = {"Authorization": f"Token {token}"}
    document = httpx.get(f"{asgi_server.url}/api/v1/gateway-config/", headers=auth).json()
    acked = httpx.post(
        f"{asgi_server.url}/api/v1/gateways/demo-gateway/ack/",
        json={"generation": document["generation"]},
        headers=auth,
    )
    assert acked.status_code == 200
    expect(row.locator('[data-field="status"]')).to_have_text("in_sync")
    expect(row.locator('[data-field="acked_generation"]')).to_have_text(str(document["generation"]))
    expect(row.locator('[data-field="last_seen"]')).not_to_have_text("never")
    assert page.evaluate("window.sameDocument") is True
