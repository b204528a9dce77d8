"""Celery beat jobs: the live figures every second, retention every hour."""

from celery import shared_task

from metrics import services


@shared_task
def publish_live() -> int:
    return services.publish_live()


@shared_task
def prune() -> int:
    return services.prune()
