"""Celery beat job: retention, every hour."""

from celery import shared_task

from call_graph import services


@shared_task(ignore_result=True)
def prune() -> int:
    return services.prune()
