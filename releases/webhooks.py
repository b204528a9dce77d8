"""Outgoing webhooks of release events: the bodies (generic JSON, Slack-compatible), the
signed POST and its delivery log. The retries are the task's (releases/tasks.py)."""

import json

import httpx
from django.conf import settings
from django.urls import reverse

from gateways import signing
from releases.models import Release, ReleaseEvent, Webhook, WebhookDelivery
from releases.serializers import ReleaseEventSerializer, ReleaseSerializer

# The events worth telling people about (an analysis every interval is not).
NOTIFIED_KINDS = frozenset(
    (
        "started",
        "advanced",
        "paused",
        "not_converged",
        "insufficient_data",
        "promoted",
        "rolled_back",
        "failed",
        "awaiting_approval",
        "approved",
        "scheduled",
        "frozen",
        "start_refused",
    )
)
# How a message names the kinds a bare "awaiting approval at step 3" would say badly.
HEADLINES = {
    "awaiting_approval": "waits for approval",
    "frozen": "held by a freeze window",
    "start_refused": "scheduled start refused",
}
# What the people who hear of these kinds should do: the release waits for them.
NEXT_STEPS = {
    "awaiting_approval": "Approve it, or roll it back, on its page",
    "frozen": "It goes on once the window ends; roll it back on its page if it must not wait",
    "start_refused": "It is tried again until it starts: fix the cause, or start or abort it "
    "on its page",
    "not_converged": "Check the gateways named, then resume it on its page",
}
TIMEOUT_SECONDS = 5.0
MAX_ATTEMPTS = 6
RETRY_MAX_DELAY = 60


def enabled_ids() -> list[int]:
    return list(Webhook.objects.filter(enabled=True).values_list("pk", flat=True))


def retry_delay(attempt: int) -> float:
    """Seconds before attempt `attempt + 1`: 2, 4, 8, ... up to RETRY_MAX_DELAY."""
    return float(min(RETRY_MAX_DELAY, 2**attempt))


def page_link(release: Release) -> str:
    """The release's page, when PUBLIC_URL says where the dashboard is."""
    if not settings.PUBLIC_URL:
        return ""
    return settings.PUBLIC_URL + reverse("dashboard:release", args=[release.pk])


def summary(event: ReleaseEvent) -> str:
    release = event.release
    headline = HEADLINES.get(event.kind, event.kind.replace("_", " "))
    text = (
        f"Release {release.pk} of {release.service} {release.from_version} → "
        f"{release.to_version}: {headline} at step {event.step + 1} "
        f"of {len(release.steps)} ({release.step_label(event.step)})"
    )
    window = event.detail.get("window")
    if window:
        gray, prod = window["gray"], window["prod"]
        text += (
            f"; gray {gray['requests']} requests, {gray['error_rate']} % errors, "
            f"prod {prod['requests']} requests, {prod['error_rate']} % errors"
        )
    reason = event.detail.get("reason")
    text = f"{text}. {_sentence(reason)}" if reason else f"{text}."
    next_step, link = NEXT_STEPS.get(event.kind), page_link(release)
    if next_step:
        return f"{text} {next_step}: {link}" if link else f"{text} {next_step}."
    return f"{text} {link}" if link else text


def _sentence(reason: str) -> str:
    reason = reason[:1].upper() + reason[1:]
    return reason if reason.endswith(".") else f"{reason}."


def body(webhook: Webhook, event: ReleaseEvent) -> bytes:
    if webhook.kind == Webhook.SLACK:
        payload: dict = {"text": summary(event)}
    else:
        payload = {
            "type": "release",
            "release": ReleaseSerializer(event.release).data,
            "event": ReleaseEventSerializer(event).data,
            "summary": summary(event),
        }
    return json.dumps(payload, separators=(",", ":")).encode()


def deliver(webhook_id: int, event_id: int, attempt: int) -> bool:
    """POST the event to the webhook once and log the attempt; True when it took it (2xx)."""
    webhook = Webhook.objects.get(pk=webhook_id)
    event = ReleaseEvent.objects.select_related("release").get(pk=event_id)
    content = body(webhook, event)
    headers = {"Content-Type": "application/json", "User-Agent": "graylane-webhook"}
    if webhook.secret:
        headers[signing.HEADER] = signing.sign(webhook.secret, content)
    status, error = None, ""
    try:
        with settings.OUTBOUND_POLICY.client(timeout=TIMEOUT_SECONDS) as client:
            answer = client.post(webhook.url, content=content, headers=headers)
        status = answer.status_code
        if not answer.is_success:
            error = f"HTTP {status}: {answer.text[:200]}"
    except httpx.HTTPError as exc:
        error = f"{type(exc).__name__}: {exc}"[:500]
    WebhookDelivery.objects.create(
        webhook=webhook,
        event=event,
        attempt=attempt,
        status_code=status,
        error=error,
        ok=not error,
    )
    return not error
