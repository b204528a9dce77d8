import gc
import os

from celery import Celery
from celery.signals import worker_ready

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "graylane.settings")

app = Celery("graylane")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@worker_ready.connect
def _freeze_startup_objects(**kwargs) -> None:
    # As graylane/asgi.py: a full garbage collection then skips what starting made.
    gc.freeze()
