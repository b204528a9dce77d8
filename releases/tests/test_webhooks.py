"""Release notifications to a real HTTP receiver on loopback: generic JSON and Slack bodies,
signed; a failed delivery is logged and retried with backoff by a real Celery worker. The
releases that wait for someone (an approval, a freeze window, a refused scheduled start) are
told with what to do, linked to the release's page when PUBLIC_URL is set."""

import json
import time
from datetime import timedelta

import pytest
from django.utils import timezone

from gateways import signing
from gateways.tests.conftest import celery_worker  # noqa: F401
from policy.models import Freeze
from releases import schedules, services, tasks, webhooks
from releases.models import Release, ReleaseEvent, Webhook, WebhookDelivery
from releases.tests.conftest import started_release
from testing.fakes.http_fake import FakeHTTPServer, FakeRequest, FakeResponse, json_reply
from testing.waiting import wait_until

SECRET = "webhook-secret-for-tests"


class Receiver(FakeHTTPServer):
    """Takes webhook POSTs, checks their signature, keeps their bodies."""

    def __init__(self):
        super().__init__()
        self.bodies: list[dict] = []
        self.bad_signatures: list[str] = []

    def handle(self, request: FakeRequest) -> FakeResponse:
        try:
            signing.verify(SECRET, request.header(signing.HEADER), request.body)
        except signing.InvalidSignature as exc:
            self.bad_signatures.append(str(exc))
            return json_reply({"error": str(exc)}, 401)
        self.bodies.append(json.loads(request.body))
        return json_reply({"ok": True})


@pytest.fixture
def receiver():
    with Receiver() as server:
        yield server


@pytest.mark.django_db
def test_generic_and_slack_bodies_are_signed_and_logged(receiver, fleet):
    generic = Webhook.objects.create(name="ci", url=receiver.url + "/hook", secret=SECRET)
    slack = Webhook.objects.create(
        name="chat", url=receiver.url + "/slack", kind=Webhook.SLACK, secret=SECRET
    )
    release = started_release()
    started = release.events.get(kind="started")
    assert webhooks.deliver(generic.pk, started.pk, attempt=1)
    assert webhooks.deliver(slack.pk, started.pk, attempt=1)
    body, text = receiver.bodies
    assert body["type"] == "release"
    assert (body["release"]["id"], body["release"]["state"]) == (release.pk, "running")
    assert (body["event"]["kind"], body["event"]["step"]) == ("started", 0)
    assert set(text) == {"text"}
    assert text["text"].startswith(f"Release {release.pk} of user-app V1 → V2: started at step 1")
    assert list(WebhookDelivery.objects.values_list("status_code", "ok", "attempt")) == [
        (200, True, 1),
        (200, True, 1),
    ]


@pytest.mark.django_db
def test_a_refused_or_unreachable_delivery_is_logged_with_its_error(receiver, fleet):
    wrong = Webhook.objects.create(name="wrong", url=receiver.url + "/", secret="not-it")
    gone = Webhook.objects.create(name="gone", url="http://127.0.0.1:9/nothing")
    event = started_release().events.get(kind="started")
    assert not webhooks.deliver(wrong.pk, event.pk, attempt=1)
    assert not webhooks.deliver(gone.pk, event.pk, attempt=2)
    refused = WebhookDelivery.objects.get(webhook=wrong)
    assert (refused.status_code, refused.ok) == (401, False)
    assert "HTTP 401" in refused.error
    unreachable = WebhookDelivery.objects.get(webhook=gone)
    assert unreachable.status_code is None and "ConnectError" in unreachable.error
    assert receiver.bad_signatures == ["Signature does not match."]


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_the_worker_notifies_and_retries_with_backoff(receiver, fleet, celery_worker):  # noqa: F811
    Webhook.objects.create(name="ci", url=receiver.url + "/hook", secret=SECRET)
    Webhook.objects.create(name="off", url=receiver.url + "/off", secret=SECRET, enabled=False)
    receiver.fail_with(503)
    release = started_release()
    started = ReleaseEvent.objects.get(release=release, kind="started")
    wait_until(lambda: WebhookDelivery.objects.filter(event=started).exists(), timeout=5)
    receiver.fail_with(None)
    wait_until(lambda: WebhookDelivery.objects.filter(event=started, ok=True).exists(), timeout=10)
    attempts = list(
        WebhookDelivery.objects.filter(event=started)
        .order_by("attempt")
        .values_list("attempt", "status_code", "at")
    )
    assert [(a, s) for a, s, _ in attempts] == [(1, 503), (2, 200)]
    assert (attempts[1][2] - attempts[0][2]).total_seconds() >= webhooks.retry_delay(1) - 0.5
    # Only notified kinds, only enabled webhooks: "created" is not sent, "off" gets nothing.
    assert [body["event"]["kind"] for body in receiver.bodies] == ["started"]
    assert not WebhookDelivery.objects.filter(webhook__name="off").exists()


@pytest.mark.django_db
def test_the_delivery_log_is_on_the_release_page(receiver, fleet, client, make_user):
    hook = Webhook.objects.create(name="ci-hook", url=receiver.url + "/hook", secret=SECRET)
    event = started_release().events.get(kind="started")
    receiver.fail_with(500)
    webhooks.deliver(hook.pk, event.pk, attempt=1)
    receiver.fail_with(None)
    webhooks.deliver(hook.pk, event.pk, attempt=2)
    make_user("vera", "viewer")
    client.login(username="vera", password="pw-for-tests")
    page = client.get(f"/releases/{event.release_id}/").content.decode()
    assert page.count('<tr data-ok="true">') == 1 and page.count('<tr data-ok="false">') == 1
    assert "HTTP 500" in page and "ci-hook" in page


@pytest.mark.django_db
def test_the_admin_refuses_a_webhook_at_a_metadata_address(admin_client):
    form = {"name": "meta", "url": "http://[fd00:ec2::254]/latest/", "kind": "generic",
            "secret": "", "enabled": "on"}  # fmt: skip
    response = admin_client.post("/admin/releases/webhook/add/", form)
    assert response.status_code == 200
    [error] = response.context["adminform"].form.errors["url"]
    assert error.startswith("fd00:ec2::254 is a cloud metadata address: refused")
    assert not Webhook.objects.filter(name="meta").exists()
    fine = admin_client.post(
        "/admin/releases/webhook/add/", {**form, "url": "http://10.0.0.7/hook"}
    )
    assert fine.status_code == 302 and Webhook.objects.filter(name="meta").exists()


@pytest.mark.django_db
def test_a_webhook_stored_at_a_refused_address_is_refused_at_connect(fleet):
    hook = Webhook.objects.create(name="legacy", url="http://169.254.169.254/latest/user-data")
    started = started_release().events.get(kind="started")
    began = time.monotonic()
    assert not webhooks.deliver(hook.pk, started.pk, attempt=1)
    assert time.monotonic() - began < 1  # refused, not timed out trying
    delivery = WebhookDelivery.objects.get(webhook=hook)
    assert delivery.status_code is None and not delivery.ok
    assert delivery.error.startswith("AddressRefused: 169.254.169.254 is a cloud metadata address")


GATED = [{"approval": True}, {"percent": 10}, {"percent": 100}]


@pytest.fixture
def slack(receiver):
    hook = Webhook.objects.create(
        name="on-call", url=receiver.url + "/slack", kind=Webhook.SLACK, secret=SECRET
    )
    return hook, receiver


@pytest.fixture
def queued(monkeypatch):
    """The (webhook, event kind) notifications queued for the worker, as they are queued."""
    found: list[tuple[int, str]] = []
    monkeypatch.setattr(
        tasks.notify,
        "delay",
        lambda webhook_id, event_id: found.append(
            (webhook_id, ReleaseEvent.objects.get(pk=event_id).kind)
        ),
    )
    return found


def create_gated(steps=GATED) -> Release:
    return services.create_release(
        service="user-app",
        to_version="V2",
        from_version=None,
        steps=steps,
        analysis_settings={"interval_s": 5, "min_requests": 10, "deadline_s": 60},
        actor="olga",
        source="api",
    )


def slack_text(slack, event: ReleaseEvent) -> str:
    hook, receiver = slack
    assert webhooks.deliver(hook.pk, event.pk, attempt=1)
    return receiver.bodies[-1]["text"]


@pytest.mark.django_db
def test_approvers_hear_that_a_release_waits_with_a_link_to_approve_it(
    fleet, slack, queued, settings, django_capture_on_commit_callbacks
):
    settings.PUBLIC_URL = "https://graylane.example.com"
    settings.RELEASE_FOUR_EYES = True
    release = create_gated()
    with django_capture_on_commit_callbacks(execute=True):
        services.act(release.pk, "start", actor="olga", source="api")
    assert queued == [(slack[0].pk, "started"), (slack[0].pk, "awaiting_approval")]
    waiting = release.events.get(kind="awaiting_approval")
    assert slack_text(slack, waiting) == (
        f"Release {release.pk} of user-app V1 → V2: waits for approval at step 1 of 3 "
        "(approval). Step 1 waits for the approval of an operator other than olga. Approve "
        f"it, or roll it back, on its page: https://graylane.example.com/releases/{release.pk}/"
    )
    with django_capture_on_commit_callbacks(execute=True):
        services.act(release.pk, "approve", actor="pete", source="ui")
    assert (slack[0].pk, "approved") in queued
    approved = release.events.get(kind="approved")
    assert "approved at step 1 of 3 (approval). Approved by pete." in slack_text(slack, approved)


@pytest.mark.django_db
def test_without_public_url_the_text_says_what_to_do_without_a_link(fleet, slack):
    release = create_gated()
    services.act(release.pk, "start", actor="olga", source="api")
    text = slack_text(slack, release.events.get(kind="awaiting_approval"))
    assert text.endswith("of an operator. Approve it, or roll it back, on its page.")
    assert "http" not in text


@pytest.mark.django_db
def test_a_scheduled_start_held_by_a_freeze_and_one_refused_are_told(
    fleet, slack, queued, settings, django_capture_on_commit_callbacks
):
    settings.PUBLIC_URL = "http://127.0.0.1:8000"
    now = timezone.now()
    release = create_gated(steps=[{"percent": 10}, {"percent": 100}])
    with django_capture_on_commit_callbacks(execute=True):
        services.act(release.pk, "start", actor="olga", source="api", at=now + timedelta(minutes=1))
    scheduled = release.events.get(kind="scheduled")
    assert "scheduled at step 1 of 2 (10 %). Starts at " in slack_text(slack, scheduled)

    freeze = Freeze.objects.create(
        starts_at=now, ends_at=now + timedelta(hours=1), services=["user-app"], reason="sale day"
    )
    later = (now + timedelta(minutes=2)).timestamp()
    with django_capture_on_commit_callbacks(execute=True):
        assert schedules.start_due(now=later) == 0
    frozen = release.events.get(kind="frozen")
    text = slack_text(slack, frozen)
    assert text.startswith(
        f"Release {release.pk} of user-app V1 → V2: held by a freeze window at step 1 of 2"
    )
    assert "Frozen until" in text and "sale day." in text
    assert text.endswith(
        "It goes on once the window ends; roll it back on its page if it must not wait: "
        f"http://127.0.0.1:8000/releases/{release.pk}/"
    )

    freeze.delete()
    other = create_gated(steps=[{"percent": 10}, {"percent": 100}])
    services.act(other.pk, "start", actor="olga", source="api")  # user-app's lane is taken
    with django_capture_on_commit_callbacks(execute=True):
        assert schedules.start_due(now=later) == 0
    refused = release.events.get(kind="start_refused")
    text = slack_text(slack, refused)
    assert ": scheduled start refused at step 1 of 2 (10 %). Another release of user-app" in text
    assert text.endswith(
        "It is tried again until it starts: fix the cause, or start or abort it on its page: "
        f"http://127.0.0.1:8000/releases/{release.pk}/"
    )
    assert [kind for _, kind in queued] == ["scheduled", "frozen", "start_refused"]


@pytest.mark.django_db
def test_a_release_paused_for_gateways_that_did_not_ack_says_to_check_them(fleet, settings):
    settings.PUBLIC_URL = "https://graylane.example.com"
    release = started_release()
    reason = "1 of 2 gateways acked generation 4 in 60 s (2 needed); not acked: edge-2"
    event = services.note(release, "not_converged", {"reason": reason}, "release")
    assert webhooks.summary(event) == (
        f"Release {release.pk} of user-app V1 → V2: not converged at step 1 of 5 (targeted "
        "users). 1 of 2 gateways acked generation 4 in 60 s (2 needed); not acked: edge-2. "
        "Check the gateways named, then resume it on its page: "
        f"https://graylane.example.com/releases/{release.pk}/"
    )
