"""The periodic sweep: what no event announces."""

from datetime import timedelta

import pytest
from django.utils import timezone

from gateways import generation, status_updates, tasks
from gateways.models import Gateway, Generation
from registry_sync.models import Instance, Service

pytestmark = pytest.mark.django_db


@pytest.fixture
def queued(monkeypatch):
    calls = []
    monkeypatch.setattr(tasks, "enqueue", lambda number, made_at, ids=None: calls.append(list(ids)))
    return calls


def test_a_change_whose_bump_was_lost_gets_a_generation(queued):
    before = generation.newest_number()
    service = Service.objects.create(name="user-app")
    # An instance appears without routable_instances_changed (as if the bump had failed).
    Instance.objects.create(service=service, instance_id="a", host="10.0.0.1", port=80)
    tasks.sweep()
    assert generation.newest_number() == before + 1
    tasks.sweep()
    assert generation.newest_number() == before + 1, "nothing more to repair"


def test_deliveries_whose_task_was_lost_are_queued_again(make_gateway, queued, settings):
    number = generation.newest_number()
    long_ago = timezone.now() - timedelta(seconds=10 * settings.GATEWAY_RETRY_MAX_DELAY)
    lost, _, _ = make_gateway("lost", "push", "http://127.0.0.1:9/", last_attempt_at=long_ago)
    make_gateway("busy", "push", "http://127.0.0.1:9/", last_attempt_at=timezone.now())
    make_gateway("done", "push", "http://127.0.0.1:9/", acked_generation=number)
    make_gateway("pulls", last_attempt_at=long_ago)
    tasks.sweep()
    assert queued == [[lost.pk]]


def test_pull_gateways_turning_stale_are_announced(make_gateway, monkeypatch, settings):
    announced = []
    monkeypatch.setattr(status_updates, "changed", lambda *ids: announced.extend(ids))
    generation.newest_number()
    now = timezone.now()
    just_stale, _, _ = make_gateway(
        "just-stale", last_seen=now - timedelta(seconds=settings.GATEWAY_STALE_SECONDS + 1)
    )
    make_gateway("long-stale", last_seen=now - timedelta(hours=1))
    make_gateway("alive", last_seen=now)
    Gateway.objects.update(created_at=now - timedelta(hours=2))
    tasks.sweep()
    assert announced == [just_stale.pk]
    assert Generation.objects.count() == 1


def test_the_sweep_forgets_old_generations_but_the_one_current_back_then():
    long_ago = timezone.now() - generation.HISTORY - timedelta(hours=1)
    old = [generation.bump(f"old {n}") for n in range(3)]
    Generation.objects.filter(number__in=old).update(created_at=long_ago)
    recent = generation.bump("recent")
    tasks.sweep()
    # The newest of the old ones was current until `recent`: "behind since when" needs it.
    assert list(Generation.objects.order_by("number").values_list("number", flat=True)) == [
        old[-1],
        recent,
    ]
