"""Whose figures the release analysis counts: samples posted through the ingestion API by
gateways that are in sync (not stale, not behind) and front the service. A gateway token
that fronts nothing, or a gateway gone stale, cannot promote or roll back a release."""

from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from gateways import generation
from gateways.models import Gateway
from metrics.tests.conftest import post, sample
from releases.tests.conftest import INTERVAL, STEPS, kinds, tick

pytestmark = pytest.mark.django_db

HEALTHY = {"gray": (200, 1), "prod": (200, 1)}
FAILING = {"gray": (30, 6), "prod": (30, 0)}  # 20 % gray errors


class Reporter:
    """A gateway token posting one interval's samples of user-app, as gateways do."""

    def __init__(self, name: str, **fields):
        self.name = name
        self.gateway, token, _ = Gateway.objects.create_with_credentials(
            name=name, mode=Gateway.PULL, **fields
        )
        self.client = APIClient()
        self.client.credentials(HTTP_AUTHORIZATION=f"Token {token}")

    def keeps_up(self, *, seen_ago: float = 0) -> None:
        """It acked the newest generation; it was last seen `seen_ago` seconds ago."""
        Gateway.objects.filter(pk=self.gateway.pk).update(
            acked_generation=generation.newest_number(),
            last_seen=timezone.now() - timedelta(seconds=seen_ago),
        )

    def report(self, release, interval: int, gray, prod):
        first = release.t0 + interval * INTERVAL
        samples = [
            sample(ts, version=version, total=total, errors=errors)
            for ts in range(first, first + INTERVAL)
            for version, (total, errors) in (("V2", gray), ("V1", prod))
        ]
        answer = post(self.client, self.name, *samples)
        assert answer.status_code == 202, answer.content
        return answer.json()


def analyses(release):
    return list(release.events.filter(kind__in=["analysis", "insufficient_data"]).order_by("id"))


def test_forged_healthy_figures_from_a_gateway_that_fronts_nothing_do_not_promote(release):
    forger = Reporter("forger")  # never acked a document: it fronts nothing
    for interval in range(len(STEPS)):
        forger.report(release, interval, **HEALTHY)
        current = tick(release, interval + 1)
    assert (current.state, current.step) == ("insufficient_data", 0)
    assert "advanced" not in kinds(current) and "promoted" not in kinds(current)
    assert all(e.detail["window"]["gray"]["requests"] == 0 for e in analyses(current))


def test_forged_failing_figures_from_a_gateway_that_fronts_nothing_do_not_roll_back(release):
    forger = Reporter("forger")
    for interval in range(3):
        forger.report(release, interval, **FAILING)
        current = tick(release, interval + 1)
    assert (current.state, current.failures) == ("insufficient_data", 0)
    assert "rolled_back" not in kinds(current)


def test_figures_of_a_gateway_whose_record_does_not_name_the_service_do_not_count(release):
    narrow = Reporter("narrow", fronts=["order-app"])
    narrow.keeps_up()
    answer = narrow.report(release, 0, **FAILING)
    assert answer["accepted"] == 0 and answer["refused"] == {"user-app": 2 * INTERVAL}
    assert tick(release, 1).state == "insufficient_data"
    # Figures taken while it fronted user-app stop counting once its record says otherwise.
    Gateway.objects.filter(name="narrow").update(fronts=["user-app"])
    assert narrow.report(release, 1, **FAILING)["accepted"] == 2 * INTERVAL
    Gateway.objects.filter(name="narrow").update(fronts=["order-app"])
    current = tick(release, 2)
    assert (current.state, current.failures) == ("insufficient_data", 0)
    detail = analyses(current)[-1].detail
    assert detail["figures_from"] == []
    assert detail["ignored_gateways"] == {"narrow": "does not front user-app"}


def test_samples_from_a_stale_gateway_do_not_count(release, settings):
    far = Reporter("far")
    far.keeps_up(seen_ago=settings.GATEWAY_STALE_SECONDS + 60)
    for interval in range(len(STEPS)):
        answer = far.report(release, interval, **HEALTHY)
        assert answer["accepted"] == 2 * INTERVAL, "a stale gateway's samples are still taken"
        current = tick(release, interval + 1)
    assert (current.state, current.step) == ("insufficient_data", 0)
    assert "advanced" not in kinds(current)
    assert analyses(current)[-1].detail["ignored_gateways"] == {"far": "stale"}


def test_each_analysis_names_the_gateways_whose_figures_it_used(release):
    edges = [Reporter("edge-a"), Reporter("edge-b")]
    behind, far = Reporter("behind"), Reporter("far")
    generation.newest_number()
    generation.bump("a newer document")  # `behind` runs the one before it
    for interval in range(len(STEPS)):
        for edge in edges:
            edge.keeps_up()
        Gateway.objects.filter(name="behind").update(
            acked_generation=generation.newest_number() - 1, last_seen=timezone.now()
        )
        far.keeps_up(seen_ago=3600)
        for edge in edges:
            edge.report(release, interval, gray=(100, 0), prod=(100, 1))
        for bad in (behind, far):
            assert bad.report(release, interval, gray=(300, 90), prod=(300, 0))["accepted"]
        current = tick(release, interval + 1)
    assert current.state == "promoted", kinds(current)
    for event in analyses(current):
        assert event.detail["figures_from"] == ["edge-a", "edge-b"]
        assert event.detail["window"]["gray"]["requests"] == 2 * 100 * INTERVAL
        ignored = event.detail["ignored_gateways"]
        assert ignored["far"] == "stale"
        assert ignored["behind"].startswith("pending")
