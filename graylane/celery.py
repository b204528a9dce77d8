import os

from celery import Celery
from celery.signals import worker_ready

from graylane.long_lived import freeze_after_start

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "graylane.settings")

app = Celery("graylane")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@worker_ready.connect
def _freeze_long_lived_objects(**kwargs) -> None:
    freeze_after_start()
