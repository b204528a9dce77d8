import os

from celery import Celery
from celery.signals import worker_process_init, worker_ready
from django.conf import settings
from django.db import connections

from graylane.long_lived import freeze_after_start

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "graylane.settings")

app = Celery("graylane")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@worker_ready.connect
def _freeze_long_lived_objects(**kwargs) -> None:
    freeze_after_start()


@worker_process_init.connect
def _no_connection_pool_in_prefork_children(**kwargs) -> None:
    """A prefork child runs one task at a time, but not on one thread: deliveries publish to
    Nacos from a thread pool and gateway status is sent from a thread of its own. Celery's
    Django fixup closes a process's PostgreSQL pool around every task in prefork children,
    under whichever of those threads is using it (`PoolClosed` in the log). The pool only
    pays off for many threads of one long-lived process, so here each thread keeps a plain
    connection of its own (CONN_MAX_AGE) instead."""
    for alias, database in settings.DATABASES.items():
        database.get("OPTIONS", {}).pop("pool", None)
        connections[alias].settings_dict.get("OPTIONS", {}).pop("pool", None)
