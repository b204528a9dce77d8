"""Releases inside a freeze window (contract "Release outcomes and control"): none starts or
advances (event `frozen`, once per window), but a failing one is still rolled back, and an
operator's rollback or abort still runs."""

from datetime import timedelta

import pytest
from django.utils import timezone

from gateways.gateway_document import build_document
from policy.models import Freeze
from releases.tests.conftest import kinds, tick, traffic

pytestmark = pytest.mark.django_db


def freeze_now(services=("user-app",), reason="Black Friday"):
    now = timezone.now()
    return Freeze.objects.create(
        starts_at=now - timedelta(minutes=1),
        ends_at=now + timedelta(hours=1),
        services=list(services),
        reason=reason,
        created_by="ada",
    )


def test_a_freeze_holds_a_running_release_while_a_rollback_still_happens(release, record):
    window = freeze_now()
    for interval in range(3):  # healthy: it would advance at each
        traffic(record, release, interval)
        current = tick(release, interval + 1)
    assert (current.state, current.step) == ("running", 0)
    assert kinds(current) == ["created", "started", "analysis", "frozen", "analysis", "analysis"]
    frozen = current.events.get(kind="frozen")
    assert frozen.detail["freeze"] == window.pk and "Black Friday" in frozen.detail["reason"]
    # Still held and analysed: a failing gray is rolled back inside the window.
    for interval in (3, 4):
        traffic(record, release, interval, gray=(200, 60), prod=(200, 0))
        current = tick(release, interval + 1)
    assert current.state == "rolled_back"
    doc = build_document(1)["services"]["user-app"]
    assert (doc["prod"], doc["quarantined"]) == ("V1", ["V2"])


def test_after_the_window_it_advances_again(release, record):
    window = freeze_now()
    traffic(record, release, 0)
    assert tick(release, 1).step == 0
    window.ends_at = timezone.now()
    window.save()
    traffic(record, release, 1)
    current = tick(release, 2)
    assert (current.state, current.step) == ("running", 1)
    assert kinds(current)[-2:] == ["analysis", "advanced"]


def test_a_window_of_another_service_does_not_hold_it(release, record):
    freeze_now(["order-app"])
    traffic(record, release, 0)
    assert tick(release, 1).step == 1


def test_no_release_starts_or_is_promoted_in_a_window_but_one_rolls_back(api, fleet):
    operator = api("operator")
    body = {"service": "user-app", "to_version": "V2", "steps": [{"percent": 5}]}
    made = operator.post("/api/v1/releases/", body, format="json").json()
    freeze_now([], reason="quarter close")  # every service
    answer = operator.post(f"/api/v1/releases/{made['id']}/start/")
    assert answer.status_code == 409 and "quarter close" in answer.json()["detail"]
    assert operator.get(f"/api/v1/releases/{made['id']}/").json()["state"] == "pending"

    Freeze.objects.all().delete()
    assert operator.post(f"/api/v1/releases/{made['id']}/start/").status_code == 200
    freeze_now([])
    assert operator.post(f"/api/v1/releases/{made['id']}/promote/").status_code == 409
    answer = operator.post(f"/api/v1/releases/{made['id']}/rollback/")
    assert answer.status_code == 200 and answer.json()["state"] == "rolled_back"
    assert build_document(1)["services"]["user-app"]["prod"] == "V1"
