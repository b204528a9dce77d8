"""acks_late for real: a Celery worker process SIGKILLed while it is delivering; another
worker delivers (Redis keeps the unacknowledged task and gives it back), also when a worker
was killed while it was giving such tasks back."""

import sys
import time

import pytest
import redis
from django.conf import settings
from django.db import connection

from gateways import generation
from gateways.models import Gateway
from testing.fakes.receiver import PushReceiver
from testing.processes import CeleryWorker, Process, database_url, django_env
from testing.waiting import wait_until

pytestmark = [
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        not settings.REDIS_URL,
        reason="needs REDIS_URL (CI sets it): the in-memory broker cannot outlive a worker",
    ),
]

# kombu's own default for the restore lock is 300 s; the settings must bound it well below.
REDELIVERED_WITHIN_SECONDS = 30.0
# The redelivery waits for the lock (10 s by default), then for a worker to start: bounded at
# ten times the lock's life, as a loaded machine may start it late; still far below 300 s.
EXPIRE = settings.CELERY_BROKER_TRANSPORT_OPTIONS["unacked_mutex_expire"]

# What a worker does while it gives unacknowledged tasks back (kombu.transport.redis
# QoS.restore_visible): it takes the restore lock, with the expiry the settings give it.
# (Once it is free: the worker killed before may have died holding it.)
HOLD_THE_RESTORE_LOCK = """
import time
from kombu.transport.redis import Mutex, MutexHeld
from graylane.celery import app
with app.connection_for_write() as connection:
    channel = connection.default_channel
    while True:
        try:
            with Mutex(channel.client, channel.unacked_mutex_key, channel.unacked_mutex_expire):
                print("holding the restore lock", flush=True)
                time.sleep(600)
        except MutexHeld:
            time.sleep(0.1)
"""


class RestoringWorker(Process):
    """A process in the middle of giving unacknowledged tasks back, as a worker is."""

    def __init__(self, env: dict[str, str]):
        super().__init__([sys.executable, "-c", HOLD_THE_RESTORE_LOCK], env)

    def is_ready(self) -> bool:
        return "holding the restore lock" in self.log()


def _worker_env() -> dict[str, str]:
    return django_env(
        database_url(connection.settings_dict),
        DJANGO_SETTINGS_MODULE="gateways.tests.kill_worker_settings",
    )


def _killed_mid_delivery(env, receiver, make_gateway) -> tuple[Gateway, int]:
    """A delivery that a worker took and never finished: it was killed."""
    gateway, _, receiver.secret = make_gateway("edge", Gateway.PUSH, receiver.url + "/cfg")
    receiver.delay(60)  # the first delivery hangs: the worker is mid-flight
    with CeleryWorker(env) as first:
        number = generation.bump("test")
        wait_until(lambda: receiver.requests_to("/cfg"), what="the delivery to start")
        first.kill()
    receiver.delay(0)
    assert receiver.applied == []
    return gateway, number


def test_a_worker_killed_mid_delivery_still_delivers(make_gateway):
    env = _worker_env()
    with PushReceiver(secret="set below") as receiver:
        gateway, number = _killed_mid_delivery(env, receiver, make_gateway)
        with CeleryWorker(env):
            wait_until(
                lambda: Gateway.objects.filter(pk=gateway.pk, acked_generation=number).exists(),
                timeout=20,
                what="the other worker to deliver",
            )
        assert receiver.applied == [number]


def test_a_worker_killed_while_giving_tasks_back_delays_them_briefly(make_gateway):
    env = _worker_env()
    lock = settings.CELERY_BROKER_TRANSPORT_OPTIONS["global_keyprefix"] + "unacked_mutex"
    with PushReceiver(secret="set below") as receiver:
        gateway, number = _killed_mid_delivery(env, receiver, make_gateway)
        with RestoringWorker(env) as restoring:
            restoring.kill()
        left = redis.Redis.from_url(settings.REDIS_URL).pttl(lock) / 1000
        assert 0 < left <= REDELIVERED_WITHIN_SECONDS, "the lock a killed worker left"
        began = time.monotonic()
        with CeleryWorker(env):
            wait_until(
                lambda: Gateway.objects.filter(pk=gateway.pk, acked_generation=number).exists(),
                timeout=10 * EXPIRE + 10,
                what="the other worker to deliver once the lock expired",
            )
        waited = time.monotonic() - began
        assert receiver.applied == [number]
    print(f"\nrestore lock left by the killed worker: {left:.1f} s; delivered after {waited:.1f} s")
    assert waited < 10 * EXPIRE
