from celery import shared_task

from rollouts import services


@shared_task(ignore_result=True)
def analyse_due() -> int:
    """Beat, every second: the releases whose interval ended."""
    return services.analyse_due()
