"""The gateways page shows, live, the records each gateway runs its generation without: an
ack with skipped records lists them in the gateway's row (still in sync), and the next ack
without any empties the list, both without a reload."""

import httpx
import pytest
from playwright.sync_api import expect

from gateways import generation
from gateways.models import Gateway

pytestmark = pytest.mark.browser
RECORD = "services.user-app.instances[10.0.0.5#7201#DEFAULT#user-app]"


@pytest.fixture
def server_url(asgi_server):
    """Pages from uvicorn: the live websocket."""
    return asgi_server.url


def test_skipped_records_show_in_the_gateways_row_as_they_are_acked(
    page, asgi_server, make_role_user, log_in
):
    _, token, _ = Gateway.objects.create_with_credentials(name="edge", mode=Gateway.PULL)
    make_role_user("vera", "viewer")
    log_in("vera")
    page.goto("/gateways/")
    row = page.locator('#gateways tr[data-gateway="edge"]')
    skipped = row.locator('[data-field="skipped"]')
    expect(skipped).to_have_text("none")
    page.evaluate("window.sameDocument = true")  # gone if the page reloads

    def ack(**body) -> None:
        answer = httpx.post(
            f"{asgi_server.url}/api/v1/gateways/edge/ack/",
            json={"generation": generation.newest_number(), **body},
            headers={"Authorization": f"Token {token}"},
        )
        assert answer.status_code == 200, answer.text

    ack(skipped=[{"record": RECORD, "reason": "port: 0 is not a port"}])
    expect(skipped).to_have_text(f"{RECORD}: port: 0 is not a port")
    expect(row.locator('[data-field="status"]')).to_have_text("in_sync")
    generation.bump("a newer one")
    ack()
    expect(skipped).to_have_text("none")
    assert page.evaluate("window.sameDocument") is True
