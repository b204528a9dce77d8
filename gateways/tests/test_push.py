"""Push delivery end to end: Celery worker (in this process, on the configured broker),
signed POSTs to a loopback receiver, retries with backoff, newest generation wins."""

from datetime import timedelta

import pytest
from django.utils import timezone

from gateways import delivery, generation
from gateways.models import Gateway
from testing.fakes.receiver import PushReceiver
from testing.waiting import wait_until

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def receiver():
    with PushReceiver(secret="set by the test") as server:
        yield server


@pytest.fixture
def push_gateway(make_gateway, receiver):
    gateway, _, secret = make_gateway("edge", Gateway.PUSH, receiver.url + "/graylane/config")
    receiver.secret = secret
    return gateway


def acked(gateway: Gateway, number: int):
    return lambda: Gateway.objects.filter(pk=gateway.pk, acked_generation=number).first()


@pytest.mark.slow
def test_a_signed_push_is_verified_applied_and_acked(celery_worker, receiver, push_gateway):
    number = generation.bump("test")
    gateway = wait_until(acked(push_gateway, number), what="the ack")
    assert receiver.applied == [number]
    assert receiver.rejected == []
    assert gateway.status_at(number, gateway.last_seen) == "in_sync"
    assert gateway.last_error == "" and gateway.attempts == 0
    headers = receiver.headers_log[-1]
    assert headers["x-graylane-generation"] == str(number)
    assert headers["x-graylane-gateway"] == "edge"


@pytest.mark.slow
def test_pushes_to_a_gateway_share_one_kept_alive_connection(celery_worker, receiver, push_gateway):
    numbers = []
    for reason in ("one", "two", "three"):
        numbers.append(generation.bump(reason))
        wait_until(acked(push_gateway, numbers[-1]), what=f"the push of {reason}")
    assert receiver.applied == numbers
    assert receiver.connections_accepted == 1


@pytest.mark.slow
def test_a_receiver_with_another_secret_refuses_it(celery_worker, receiver, push_gateway):
    receiver.secret = "not the gateway's secret"
    number = generation.bump("test")
    gateway = wait_until(
        lambda: Gateway.objects.filter(pk=push_gateway.pk, attempts__gte=1).first(),
        what="a failed attempt",
    )
    assert receiver.applied == []
    assert receiver.rejected and "does not match" in receiver.rejected[0]
    assert "HTTP 401" in gateway.last_error
    assert gateway.status_at(number, gateway.last_attempt_at) == "failing"


@pytest.mark.slow
def test_deliveries_retry_until_the_gateway_is_back_and_end_on_the_newest(
    celery_worker, receiver, push_gateway
):
    receiver.fail_with(503, "restarting")
    first = generation.bump("one")
    wait_until(
        lambda: Gateway.objects.filter(pk=push_gateway.pk, attempts__gte=2).exists(),
        what="two failed attempts",
    )
    failing = Gateway.objects.get(pk=push_gateway.pk)
    assert failing.status_at(first, failing.last_attempt_at) == "failing"
    assert "HTTP 503" in failing.last_error
    newest = generation.bump("two")
    wait_until(
        lambda: Gateway.objects.filter(pk=push_gateway.pk, attempts__gte=3).exists(),
        what="the newest generation failing too",
    )
    receiver.fail_with(None)
    gateway = wait_until(acked(push_gateway, newest), timeout=15, what="the newest generation")
    assert receiver.applied == [newest], "the older generation is never sent after a newer one"
    assert gateway.attempts == 0 and gateway.last_error == ""


@pytest.mark.slow
def test_two_publishes_in_quick_succession_end_on_the_newer(celery_worker, receiver, push_gateway):
    generation.bump("one")
    newer = generation.bump("two")
    wait_until(acked(push_gateway, newer), what="the newer generation")
    assert receiver.generation == newer
    assert receiver.applied == sorted(receiver.applied)


@pytest.mark.slow
def test_an_unreachable_gateway_fails_until_its_endpoint_is_fixed(
    celery_worker, api, make_gateway, receiver
):
    gateway, _, secret = make_gateway("edge", Gateway.PUSH, "http://127.0.0.1:9/nothing-here")
    receiver.secret = secret
    number = generation.bump("test")
    failing = wait_until(
        lambda: Gateway.objects.filter(pk=gateway.pk, attempts__gte=1).first(),
        what="a failed attempt",
    )
    assert "Connection refused" in failing.last_error
    response = api("admin").patch(
        "/api/v1/gateways/edge/", {"endpoint": receiver.url + "/config"}, format="json"
    )
    assert response.status_code == 200
    wait_until(acked(gateway, number), what="delivery to the new endpoint")
    assert receiver.applied == [number]


@pytest.mark.slow
def test_one_delivery_serves_every_push_gateway_and_a_failing_one_holds_up_no_other(
    celery_worker, make_gateway
):
    with (
        PushReceiver(secret="-") as slow,
        PushReceiver(secret="-") as broken,
        PushReceiver(secret="-") as healthy,
    ):
        gateways = {}
        for name, receiver in (("slow", slow), ("broken", broken), ("healthy", healthy)):
            gateways[name], _, receiver.secret = make_gateway(
                name, Gateway.PUSH, receiver.url + "/cfg"
            )
        slow.delay(1.0)  # in parallel: the others do not wait for it
        broken.fail_with(503, "restarting")
        number = generation.bump("test")
        wait_until(acked(gateways["healthy"], number), timeout=0.9, what="the healthy gateway")
        wait_until(acked(gateways["slow"], number), what="the slow gateway")
        failing = wait_until(
            lambda: Gateway.objects.filter(pk=gateways["broken"].pk, attempts__gte=2).first(),
            what="the broken gateway's retry",
        )
        assert "HTTP 503" in failing.last_error
        healthy_pushes = len(healthy.requests_to("/cfg"))
        broken.fail_with(None)
        wait_until(acked(gateways["broken"], number), timeout=15, what="the repaired gateway")
        # Retries went to the broken gateway only: the others already run `number`.
        assert len(healthy.requests_to("/cfg")) == healthy_pushes == 1
        assert (healthy.applied, slow.applied, broken.applied) == ([number],) * 3


def test_a_delivery_queued_before_the_database_was_reset_is_dropped(make_gateway, receiver):
    # Generation numbers start again after a reset: a task queued before it (a retry, say)
    # must not push the new database's generation as if it were its own.
    number = generation.newest_number()  # before the gateway exists: nothing is queued
    _, _, receiver.secret = make_gateway("edge", Gateway.PUSH, receiver.url + "/cfg")
    before_the_reset = timezone.now() - timedelta(days=1)
    assert "is gone" in delivery.deliver(number, before_the_reset)
    assert receiver.requests_to("/cfg") == []
    outcome = delivery.deliver(number, generation.current().created_at)
    assert outcome == f"delivered generation {number} to 1 gateways"
    assert receiver.applied == [number]


@pytest.mark.slow
def test_a_gateway_that_hung_up_an_idle_connection_gets_the_next_push_once(
    celery_worker, receiver, push_gateway
):
    first = generation.bump("one")
    wait_until(acked(push_gateway, first), what="the first push")
    receiver._server.close_connections()  # as a gateway closing idle keep-alive connections
    second = generation.bump("two")
    wait_until(acked(push_gateway, second), what="the second push")
    assert receiver.applied == [first, second]
    assert len(receiver.requests_to("/graylane/config")) == 2, "each push sent once"
