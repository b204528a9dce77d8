"""The production worker: Celery's prefork pool on PostgreSQL and Redis. Deliveries and
the live status they cause run in forked children, with the database connection pool
and the status sender thread of their own; nothing may log an error doing so."""

import time

import pytest
from django.conf import settings
from django.db import connection

from gateways import generation
from gateways.models import Gateway
from testing.fakes.receiver import PushReceiver
from testing.processes import CeleryWorker, database_url, django_env
from testing.waiting import wait_until

pytestmark = [
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        not settings.REDIS_URL or connection.vendor != "postgresql",
        reason="needs PostgreSQL and REDIS_URL (CI sets both): the production worker setup",
    ),
]


def test_the_prefork_worker_delivers_and_reports_status_without_errors(make_gateway):
    env = django_env(database_url(connection.settings_dict))
    with PushReceiver(secret="one secret for all twenty") as receiver:
        for n in range(20):
            make_gateway(f"edge-{n}", Gateway.PUSH, receiver.url + "/cfg")
        Gateway.objects.update(push_secret=receiver.secret)
        with CeleryWorker(env, pool="prefork", concurrency=2) as worker:
            # Each generation is a delivery task; each task's acks wake the child's status
            # sender, which reads the database while the next task starts and ends.
            for round_ in range(30):
                number = generation.bump(f"round {round_}")
                time.sleep(0.03)
            wait_until(
                lambda: Gateway.objects.filter(acked_generation=number).count() == 20,
                timeout=30,
                what=f"generation {number} delivered to every gateway by the prefork worker",
            )
            time.sleep(1.0)  # the children's last status messages
    log = worker.final_log  # shutting down included
    errors = [line for line in log.splitlines() if "ERROR" in line or "Traceback" in line]
    assert errors == [], log
