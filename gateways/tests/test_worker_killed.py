"""acks_late for real: a Celery worker process SIGKILLed while it is delivering; another
worker delivers (Redis keeps the unacknowledged task and gives it back)."""

import pytest
from django.conf import settings
from django.db import connection

from gateways import generation
from gateways.models import Gateway
from gateways.tests.conftest import wait_until
from testing.fakes.receiver import PushReceiver
from testing.processes import CeleryWorker, database_url, django_env

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        not settings.REDIS_URL,
        reason="needs REDIS_URL (CI sets it): the in-memory broker cannot outlive a worker",
    ),
]


def test_a_worker_killed_mid_delivery_still_delivers(make_gateway):
    env = django_env(
        database_url(connection.settings_dict),
        DJANGO_SETTINGS_MODULE="gateways.tests.kill_worker_settings",
    )
    with PushReceiver(secret="set below") as receiver:
        gateway, _, receiver.secret = make_gateway("edge", Gateway.PUSH, receiver.url + "/cfg")
        receiver.delay(60)  # the first delivery hangs: the worker is mid-flight
        with CeleryWorker(env) as first:
            number = generation.bump("test")
            wait_until(lambda: receiver.requests_to("/cfg"), what="the delivery to start")
            first.kill()
        receiver.delay(0)
        assert receiver.applied == []
        with CeleryWorker(env):
            wait_until(
                lambda: Gateway.objects.filter(pk=gateway.pk, acked_generation=number).exists(),
                timeout=20,
                what="the other worker to deliver",
            )
        assert receiver.applied == [number]
