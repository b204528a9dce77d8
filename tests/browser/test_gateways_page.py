"""The gateways page follows, live, what each gateway fronts, the metric samples refused
from it and the records it runs its generation without: a forged batch, an admin widening
its `fronts`, an ack with skipped records (still in sync; a lane it cannot carry said so)
and the next ack without any all show up in its row without a reload."""

import time

import httpx
import pytest
from django.utils import timezone
from playwright.sync_api import expect

from accounts.models import ApiToken
from gateways import generation
from gateways.models import Gateway
from policy.publishing import load_state
from policy.services import update_policy
from registry_sync.models import Service

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # a uvicorn of its own (asgi_server)
RECORD = "services.user-app.instances[10.0.0.5#7201#DEFAULT#user-app]"


@pytest.fixture
def server_url(asgi_server):
    """Pages from uvicorn: the live websocket."""
    return asgi_server.url


def test_refused_samples_and_fronts_show_live(page, asgi_server, make_role_user, log_in):
    Service.objects.create(name="user-app")
    Service.objects.create(name="order-app")
    _, token, _ = Gateway.objects.create_with_credentials(
        name="edge",
        mode=Gateway.PULL,
        fronts=["user-app"],
        acked_generation=generation.bump("two services"),
        last_seen=timezone.now(),
    )
    _, admin_key = ApiToken.objects.issue(make_role_user("ada", "admin"))
    make_role_user("vera", "viewer")
    log_in("vera")
    page.goto("/gateways/")
    row = page.locator('#gateways tr[data-gateway="edge"]')
    expect(row.locator('[data-field="fronts"]')).to_have_text("user-app")
    expect(row.locator('[data-field="refused_samples"]')).to_have_text("0")
    page.evaluate("window.sameDocument = true")  # gone if the page reloads

    now = int(time.time())
    samples = [
        {"service": service, "version": "V1", "ts": now - n, "total": 10, "errors": 0}
        for service, n in [("user-app", 1), ("order-app", 1), ("ghost-app", 1), ("ghost-app", 2)]
    ]
    answer = httpx.post(
        f"{asgi_server.url}/api/v1/metrics/",
        json={"gateway": "edge", "samples": samples},
        headers={"Authorization": f"Token {token}"},
    )
    assert answer.status_code == 202, answer.text
    assert answer.json()["refused"] == {"order-app": 1, "ghost-app": 2}
    expect(row.locator('[data-field="refused_samples"]')).to_have_text("3")
    expect(row.locator('[data-field="last_refused"]')).to_have_text("ghost-app 2, order-app 1")

    widened = httpx.patch(
        f"{asgi_server.url}/api/v1/gateways/edge/",
        json={"fronts": []},
        headers={"Authorization": f"Token {admin_key}"},
    )
    assert widened.status_code == 200, widened.text
    expect(row.locator('[data-field="fronts"]')).to_have_text("all")
    assert page.evaluate("window.sameDocument") is True


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

    ack(skipped=[{"record": RECORD, "reason": "port: 0 is not a port"},
                 {"record": "lanes[feature-x]", "reason": "not carried yet"}])  # fmt: skip
    expect(skipped.locator("div")).to_have_text(
        [f"{RECORD}: port: 0 is not a port", "cannot carry lane feature-x: not carried yet"]
    )
    expect(skipped.locator("a")).to_have_attribute("href", "/lanes/#lane-feature-x")
    expect(row.locator('[data-field="status"]')).to_have_text("in_sync")
    generation.bump("a newer one")
    ack()
    expect(skipped).to_have_text("none")
    assert page.evaluate("window.sameDocument") is True


def test_each_generation_shows_the_revision_it_holds_live(
    page, asgi_server, make_role_user, log_in, screenshot
):
    """Issue 26: the page says what a generation is beside a revision, and a gateway's acked
    generation comes with its revision, also as its ack arrives."""
    _, token, _ = Gateway.objects.create_with_credentials(name="edge", mode=Gateway.PULL)
    make_role_user("vera", "viewer")
    log_in("vera")
    page.goto("/gateways/")
    explained = page.locator("#generations-explained")
    expect(explained).to_contain_text("A revision is a published change of the policy document")
    expect(explained).to_contain_text("without a new revision, for every change of the routable")
    row = page.locator('#gateways tr[data-gateway="edge"]')
    expect(row.locator('[data-field="acked_revision"]')).to_have_text("—")
    page.evaluate("window.sameDocument = true")  # gone if the page reloads

    update_policy({"users": ["1001"]}, partial=True, actor="bob", source="api",
                  expected_revision=None)  # fmt: skip
    revision = load_state().revision
    instances_moved = generation.bump("instances of user-app")
    answer = httpx.post(
        f"{asgi_server.url}/api/v1/gateways/edge/ack/",
        json={"generation": instances_moved},
        headers={"Authorization": f"Token {token}"},
    )
    assert answer.status_code == 200, answer.text
    expect(row.locator('[data-field="acked_generation"]')).to_have_text(str(instances_moved))
    expect(row.locator('[data-field="acked_revision"]')).to_have_text(str(revision))
    expect(page.locator("#current-generation")).to_have_text(str(instances_moved))
    expect(page.locator("#current-revision")).to_have_text(str(revision))
    assert page.evaluate("window.sameDocument") is True
    screenshot("gateways-generation-revision")
