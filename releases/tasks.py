from celery import shared_task

from releases import services, webhooks


@shared_task(ignore_result=True)
def analyse_due() -> int:
    """Beat, every second: the releases whose interval ended."""
    return services.analyse_due()


@shared_task(bind=True, ignore_result=True, max_retries=webhooks.MAX_ATTEMPTS - 1)
def notify(self, webhook_id: int, event_id: int) -> None:
    """One release event to one webhook; a failed attempt is logged and retried with a
    growing delay, MAX_ATTEMPTS in all."""
    attempt = self.request.retries + 1
    if not webhooks.deliver(webhook_id, event_id, attempt) and attempt < webhooks.MAX_ATTEMPTS:
        raise self.retry(countdown=webhooks.retry_delay(attempt))


def on_release_event(sender, event, **kwargs) -> None:
    """Queue a notification of this event to every enabled webhook."""
    if event.kind not in webhooks.NOTIFIED_KINDS:
        return
    for webhook_id in webhooks.enabled_ids():
        notify.delay(webhook_id, event.pk)
