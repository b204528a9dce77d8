"""Background jobs inside the web process, for the default mode without Redis.

The in-memory channel layer only reaches websockets of the process that owns it, so
without Redis the Celery worker and beat must live in the web server's process: a worker
thread consuming the in-memory broker and an embedded beat thread. With REDIS_URL set,
`celery -A graylane worker -B` runs them as their own processes instead.
"""

import logging
import threading

from celery.beat import EmbeddedService
from django.conf import settings

from graylane.celery import app

log = logging.getLogger(__name__)
_started = False
_lock = threading.Lock()


def start_in_process_jobs() -> bool:
    global _started
    if settings.REDIS_URL or not settings.IN_PROCESS_JOBS:
        return False
    with _lock:
        if _started:
            return False
        _started = True
    settings.VAR_DIR.mkdir(parents=True, exist_ok=True)
    worker = app.WorkController(
        pool_cls="threads",
        concurrency=4,
        without_heartbeat=True,
        without_mingle=True,
        without_gossip=True,
    )
    threading.Thread(target=worker.start, name="celery-worker", daemon=True).start()
    beat = EmbeddedService(
        app, thread=True, schedule_filename=str(settings.VAR_DIR / "celerybeat-schedule")
    )
    beat.start()
    log.info("Background jobs run inside this process (no REDIS_URL).")
    return True
