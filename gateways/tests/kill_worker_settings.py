"""Settings of the worker that test_worker_killed.py kills: with Redis, a task a dead worker
had taken comes back after `visibility_timeout` (an hour by default); here after 2 s, with
the sweep that brings it back running every second. The Redis lock that sweep holds expires
as in production (graylane/settings.py), which the test proves."""

from graylane.settings import *  # noqa: F403

CELERY_BROKER_TRANSPORT_OPTIONS = {
    **CELERY_BROKER_TRANSPORT_OPTIONS,  # noqa: F405
    "visibility_timeout": 2,
    "unacked_restore_interval": 1,
    "unacked_restore_throttle": 1,
}
