import os
from typing import Any

from celery import Celery, Task, states
from celery.signals import task_postrun, task_prerun, worker_process_init, worker_ready
from django.conf import settings
from django.db import close_old_connections, connections

from graylane.long_lived import freeze_after_start

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "graylane.settings")

app = Celery("graylane")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@worker_ready.connect
def _freeze_long_lived_objects(**kwargs: Any) -> None:
    freeze_after_start()


@worker_process_init.connect
def _no_connection_pool_in_prefork_children(**kwargs: Any) -> None:
    """A prefork child runs one task at a time, but not on one thread: deliveries publish to
    Nacos from a thread pool and gateway status is sent from a thread of its own. Celery's
    Django fixup closes a process's PostgreSQL pool around every task in prefork children,
    under whichever of those threads is using it (`PoolClosed` in the log). The pool only
    pays off for many threads of one long-lived process, so here each thread keeps a plain
    connection of its own (CONN_MAX_AGE) instead."""
    for alias, database in settings.DATABASES.items():
        database.get("OPTIONS", {}).pop("pool", None)
        connections[alias].settings_dict.get("OPTIONS", {}).pop("pool", None)


def _runs_eagerly(task: Task | None) -> bool:
    """A task run eagerly (`.apply()`, or `task_always_eager`) runs on its caller's thread,
    maybe inside the caller's transaction: the caller's connections are not the task's to
    close."""
    return task is not None and bool(task.request.is_eager)


@task_prerun.connect
def _usable_connections_before_a_task(task: Task | None = None, **kwargs: Any) -> None:
    """Connections are kept across tasks (CELERY_DB_REUSE_MAX in settings): before each
    one, those past CONN_MAX_AGE or failing their health check are closed, as Django does
    before a request."""
    if not _runs_eagerly(task):
        close_old_connections()


@task_postrun.connect
def _tidy_connections_after_a_task(
    task: Task | None = None, state: str | None = None, **kwargs: Any
) -> None:
    """After a task that failed or is retried (a database error, a time limit that
    interrupted a query), its thread's connections may be unusable in ways Django cannot
    see: closed. After one that succeeded, kept as Django would keep them."""
    if _runs_eagerly(task):
        return
    if state == states.SUCCESS:
        close_old_connections()
    else:
        connections.close_all()
