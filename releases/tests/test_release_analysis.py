"""The beat job's analysis on recorded series: the live windows hold what gateways reported,
each interval is judged, and the release advances, waits, rolls back or fails."""

from datetime import timedelta

import pytest
from django.utils import timezone

from gateways.gateway_document import build_document
from releases import services
from releases.models import Release
from releases.tests.conftest import INTERVAL, LAG, STEPS, kinds, tick, traffic

pytestmark = pytest.mark.django_db


def test_healthy_intervals_advance_step_by_step_to_promotion(release, record):
    for interval in range(len(STEPS)):
        traffic(record, release, interval)
        current = tick(release, interval + 1)
    assert current.state == "promoted"
    assert kinds(current)[2:] == ["analysis", "advanced"] * 4 + ["analysis", "promoted"]
    analysis = current.events.filter(kind="analysis").order_by("at", "id").first()
    assert analysis.detail["window"]["gray"]["requests"] == 1000
    assert analysis.detail["window"]["prod"]["error_rate"] == 0.5
    assert analysis.detail["verdict"] == "healthy"
    assert "p_value" in analysis.detail["test"]
    assert build_document(1)["services"]["user-app"]["prod"] == "V2"


def test_an_interval_not_yet_over_is_not_judged(release, record):
    traffic(record, release, 0)
    services.analyse_due(now=release.t0 + INTERVAL - 1 + LAG)
    assert kinds(Release.objects.get(pk=release.pk)) == ["created", "started"]


def test_too_little_traffic_is_insufficient_data_then_it_goes_on(release, record):
    traffic(record, release, 0, gray=(2, 0))  # 10 gray requests, 50 needed
    current = tick(release, 1)
    assert (current.state, current.step) == ("insufficient_data", 0)
    event = current.events.first()
    assert event.kind == "insufficient_data"
    assert event.detail["window"]["gray"]["requests"] == 10
    assert "fewer than 50" in event.detail["reason"]
    # No traffic at all: still insufficient, never an advance.
    current = tick(release, 2)
    assert (current.state, current.step) == ("insufficient_data", 0)
    assert current.events.first().detail["window"]["gray"]["requests"] == 0
    traffic(record, release, 2)
    current = tick(release, 3)
    assert (current.state, current.step) == ("running", 1)


def test_rolled_back_after_more_bad_intervals_than_tolerated(release, record):
    traffic(record, release, 0, gray=(30, 6), prod=(30, 0))  # 20 % errors
    current = tick(release, 1)
    assert (current.state, current.failures) == ("running", 1)
    assert current.events.first().detail["verdict"] == "failed"
    traffic(record, release, 1, gray=(30, 6), prod=(30, 0))
    current = tick(release, 2)
    assert current.state == "rolled_back"
    decisive = current.events.filter(kind="analysis").first()
    assert decisive.detail["since_start"]["gray"]["error_rate"] == 20.0
    test = decisive.detail["test"]
    assert test["likelihood_ratio"] >= test["rollback_ratio"] or test["p_value"] <= test["alpha"]
    # Routing as before the release, and V2 quarantined: none of its instances is sent.
    doc = build_document(1)["services"]["user-app"]
    assert (doc["prod"], doc.get("percent"), doc.get("targeted")) == ("V1", None, None)
    assert doc["quarantined"] == ["V2"]
    assert {instance["version"] for instance in doc["instances"]} == {"V1"}


def test_a_paused_release_is_not_analysed(release, record):
    services.act(release.pk, "pause", actor="olga", source="api")
    traffic(record, release, 0, gray=(30, 30))
    assert tick(release, 1).state == "paused"


def test_the_progress_deadline_fails_the_release_and_routes_to_prod(release, record):
    Release.objects.filter(pk=release.pk).update(
        step_started_at=timezone.now() - timedelta(seconds=601)
    )
    current = tick(release, 1)  # an empty window: insufficient data, and past the deadline
    assert current.state == "failed"
    assert current.events.first().kind == "failed"
    assert "600 s" in current.events.first().detail["reason"]
    # Routing as before the release; a failure quarantines nothing.
    doc = build_document(1)["services"]["user-app"]
    assert (doc["prod"], doc.get("targeted"), doc.get("quarantined")) == ("V1", None, None)


def test_the_beat_job_is_scheduled():
    from django.conf import settings

    entry = settings.CELERY_BEAT_SCHEDULE["releases-analyse"]
    assert entry["task"] == "releases.tasks.analyse_due"
    assert entry["schedule"] <= 1.0
