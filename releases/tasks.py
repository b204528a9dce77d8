import functools
from typing import Any

from celery import Task, shared_task

from events.after_commit import best_effort
from releases import schedules, services, webhooks
from releases.models import ReleaseEvent


@shared_task(ignore_result=True)
def analyse_due() -> int:
    """Beat, every second: the scheduled releases whose time came (started first, so a
    start is never a second late), then the releases whose interval ended."""
    return schedules.start_due() + services.analyse_due()


@shared_task(bind=True, ignore_result=True, max_retries=webhooks.MAX_ATTEMPTS - 1)
def notify(self: Task, webhook_id: int, event_id: int) -> None:
    """One release event to one webhook; a failed attempt is logged and retried with a
    growing delay, MAX_ATTEMPTS in all."""
    attempt = self.request.retries + 1
    if not webhooks.deliver(webhook_id, event_id, attempt) and attempt < webhooks.MAX_ATTEMPTS:
        raise self.retry(countdown=webhooks.retry_delay(attempt))


def on_release_event(sender: object, event: ReleaseEvent, **kwargs: Any) -> None:
    """Queue a notification of this event to every enabled webhook, best effort; each one
    on its own, so that a retry never notifies a webhook twice."""
    if event.kind not in webhooks.NOTIFIED_KINDS:
        return

    def queue_each() -> None:
        for webhook_id in webhooks.enabled_ids():
            best_effort(
                functools.partial(notify.delay, webhook_id, event.pk),
                f"queuing webhook {webhook_id}'s notification of release event {event.pk}",
            )

    best_effort(queue_each, f"finding the webhooks of release event {event.pk}")
