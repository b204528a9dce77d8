"""Scheduled starts: `start` with `{"at"}` puts a release in `scheduled`; the beat job that
runs the analysis starts it once its time has come, unless a freeze window over its service
holds it (then it waits, saying so once, and starts after the window). The releases page
lists freeze windows and scheduled starts, soonest first."""

from datetime import timedelta

import pytest
from django.utils import timezone

from audit.models import AuditEntry
from gateways.gateway_document import build_document
from policy.models import Freeze
from releases import schedules, tasks
from releases.models import Release
from releases.tests.conftest import STEPS

pytestmark = pytest.mark.django_db


def create(client, service="user-app"):
    body = {"service": service, "to_version": "V2", "steps": STEPS}
    response = client.post("/api/v1/releases/", body, format="json")
    assert response.status_code == 201, response.json()
    return response.json()


def schedule(client, release, at):
    return client.post(f"/api/v1/releases/{release['id']}/start/", {"at": at}, format="json")


def kinds(release):
    return [e.kind for e in Release.objects.get(pk=release["id"]).events.order_by("at", "id")]


@pytest.fixture
def scheduled(api, fleet):
    """A release of user-app V2 scheduled ten minutes ahead; `.at` that time."""
    olga = api("operator", "olga")
    made = create(olga)
    at = timezone.now() + timedelta(minutes=10)
    response = schedule(olga, made, at.isoformat())
    assert response.status_code == 200, response.json()
    made.update(response.json(), at=at, client=olga)
    return made


def test_start_at_a_time_schedules_the_release(scheduled):
    assert scheduled["state"] == "scheduled"
    assert scheduled["scheduled_at"].startswith(scheduled["at"].strftime("%Y-%m-%dT%H:%M:%S"))
    assert scheduled["allowed_actions"] == ["start", "abort"]
    assert kinds(scheduled) == ["created", "scheduled"]
    assert "targeted" not in build_document(1)["services"]["user-app"]  # nothing routed yet
    entry = AuditEntry.objects.get(action="release.start")
    assert entry.actor == "olga"
    assert entry.after["state"] == "scheduled"


@pytest.mark.parametrize(
    "at, message",
    [("2020-01-01T00:00:00Z", "future"), ("tomorrow", "format"), ("", "format")],
)
def test_a_past_or_bad_time_is_400_and_nothing_changes(api, fleet, at, message):
    olga = api("operator", "olga")
    made = create(olga)
    response = schedule(olga, made, at)
    assert response.status_code == 400
    assert message in " ".join(response.json()["at"])
    assert Release.objects.get(pk=made["id"]).state == "pending"


@pytest.mark.parametrize("action", ["pause", "resume", "promote", "approve", "rollback"])
def test_scheduled_refuses_other_actions_with_409(scheduled, action):
    refused = scheduled["client"].post(f"/api/v1/releases/{scheduled['id']}/{action}/")
    assert refused.status_code == 409
    assert "scheduled" in refused.json()["detail"]


def test_start_without_a_time_starts_a_scheduled_release_now(scheduled):
    started = scheduled["client"].post(f"/api/v1/releases/{scheduled['id']}/start/")
    assert started.json()["state"] == "running"
    assert build_document(1)["services"]["user-app"]["targeted"] is True


def test_abort_drops_a_scheduled_release(scheduled):
    aborted = scheduled["client"].post(f"/api/v1/releases/{scheduled['id']}/abort/")
    assert aborted.json()["state"] == "aborted"
    assert schedules.start_due(now=(scheduled["at"] + timedelta(minutes=1)).timestamp()) == 0
    assert "targeted" not in build_document(1)["services"]["user-app"]


def test_the_due_job_starts_it_once_its_time_has_come(scheduled):
    assert schedules.start_due(now=(scheduled["at"] - timedelta(seconds=1)).timestamp()) == 0
    assert Release.objects.get(pk=scheduled["id"]).state == "scheduled"

    assert schedules.start_due(now=(scheduled["at"] + timedelta(seconds=1)).timestamp()) == 1
    release = Release.objects.get(pk=scheduled["id"])
    assert (release.state, release.step) == ("running", 0)
    assert build_document(1)["services"]["user-app"]["targeted"] is True
    started = release.events.get(kind="started")
    assert started.actor == schedules.SCHEDULE_ACTOR
    assert AuditEntry.objects.filter(action="release.start", actor="release-schedule").exists()


def test_the_beat_task_starts_due_scheduled_releases(scheduled):
    Release.objects.filter(pk=scheduled["id"]).update(
        scheduled_at=timezone.now() - timedelta(seconds=1)
    )
    tasks.analyse_due()
    assert Release.objects.get(pk=scheduled["id"]).state == "running"


def test_a_freeze_window_holds_a_scheduled_start_until_it_ends(scheduled):
    at = scheduled["at"]
    window = Freeze.objects.create(
        starts_at=at - timedelta(minutes=5),
        ends_at=at + timedelta(hours=1),
        services=["user-app"],
        reason="Black Friday",
        created_by="root",
    )
    Freeze.objects.create(
        starts_at=at - timedelta(minutes=5),
        ends_at=at + timedelta(hours=2),
        services=["order-app"],
        reason="not this service",
    )
    for minutes in (1, 2, 30):
        assert schedules.start_due(now=(at + timedelta(minutes=minutes)).timestamp()) == 0
    release = Release.objects.get(pk=scheduled["id"])
    assert release.state == "scheduled"
    assert kinds(scheduled) == ["created", "scheduled", "frozen"]
    frozen = release.events.get(kind="frozen")
    assert frozen.detail["freeze"] == window.pk
    assert "Black Friday" in frozen.detail["reason"]
    assert "targeted" not in build_document(1)["services"]["user-app"]

    after = window.ends_at + timedelta(seconds=1)
    assert schedules.start_due(now=after.timestamp()) == 1
    assert Release.objects.get(pk=scheduled["id"]).state == "running"


def test_a_start_refused_at_its_time_waits_and_says_why_once(scheduled, api):
    olga = scheduled["client"]
    other = create(olga)
    assert olga.post(f"/api/v1/releases/{other['id']}/start/").json()["state"] == "running"
    later = (scheduled["at"] + timedelta(minutes=1)).timestamp()
    assert schedules.start_due(now=later) == 0
    assert schedules.start_due(now=later + 1) == 0
    assert kinds(scheduled) == ["created", "scheduled", "start_refused"]
    refused = Release.objects.get(pk=scheduled["id"]).events.first()
    assert "Another release of user-app" in refused.detail["reason"]

    olga.post(f"/api/v1/releases/{other['id']}/abort/")
    assert schedules.start_due(now=later + 2) == 1


def test_the_releases_page_lists_freezes_and_scheduled_starts_soonest_first(
    scheduled, client, make_user
):
    later = Freeze.objects.create(
        starts_at=scheduled["at"] + timedelta(hours=1),
        ends_at=scheduled["at"] + timedelta(hours=3),
        services=[],
        reason="Quarter close",
    )
    sooner = Freeze.objects.create(
        starts_at=scheduled["at"] - timedelta(minutes=5),
        ends_at=scheduled["at"] - timedelta(minutes=1),
        services=["order-app"],
        reason="Migration",
    )
    Freeze.objects.create(
        starts_at=timezone.now() - timedelta(hours=2),
        ends_at=timezone.now() - timedelta(hours=1),
        reason="over",
    )
    make_user("vic", "viewer")
    client.login(username="vic", password="pw-for-tests")
    page = client.get("/releases/").content.decode()
    upcoming = page[page.index('id="upcoming"') :]
    upcoming = upcoming[: upcoming.index("</section>")]
    marks = [
        f'data-freeze-id="{sooner.pk}"',
        f'data-release-id="{scheduled["id"]}"',
        f'data-freeze-id="{later.pk}"',
    ]
    assert [upcoming.index(mark) for mark in marks] == sorted(upcoming.index(m) for m in marks)
    assert "over" not in upcoming
    assert "Quarter close" in upcoming and "all" in upcoming
    assert scheduled["at"].strftime("%Y-%m-%d %H:%M:%S") in upcoming
