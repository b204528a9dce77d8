"""The new-release form takes what the API takes: the comparative latency bound, custom
PromQL metrics (one per line; the bundle form too) and a start time that schedules the
release; the API's refusals show on the field they concern. A pending release's page
schedules its start, a scheduled one's starts it now."""

from datetime import UTC, datetime, timedelta

import pytest

from audit.models import AuditEntry
from releases.models import Release
from releases.tests.test_bundle_pages import FORM as BUNDLE_FORM
from releases.tests.test_release_pages import FORM

pytestmark = pytest.mark.django_db

QUEUE = 'queue | max(queue_depth{service="{service}", version=~"{version}|canary"}) | above | 100'


@pytest.fixture
def operator(client, make_user):
    make_user("olga", "operator")
    client.login(username="olga", password="pw-for-tests")
    return client


@pytest.fixture
def prometheus(settings):
    """Custom metrics need a Prometheus to read them from (nothing is read here)."""
    settings.PROMETHEUS_URL = "http://127.0.0.1:9"


def local_input(moment: datetime) -> str:
    """A time as the browser's datetime-local input sends it."""
    return moment.strftime("%Y-%m-%dT%H:%M")


def test_a_latency_bound_and_custom_metrics_from_the_form(operator, fleet, prometheus):
    metrics = f"{QUEUE}\n\n  saturation | avg(cpu{{lane='{{lane}}'}}) | below | 0.25  \n"
    response = operator.post(
        "/releases/", {**FORM, "max_p95_increase_ms": "25", "metrics": metrics}
    )
    release = Release.objects.get()
    assert response.status_code == 302 and release.state == "running"
    assert release.analysis["max_p95_increase_ms"] == 25.0
    assert release.analysis["metrics"] == [
        {
            "name": "queue",
            "query": 'max(queue_depth{service="{service}", version=~"{version}|canary"})',
            "fail_when": "above",
            "bound": 100.0,
        },
        {
            "name": "saturation",
            "query": "avg(cpu{lane='{lane}'})",
            "fail_when": "below",
            "bound": 0.25,
        },
    ]
    page = operator.get(f"/releases/{release.pk}/").content.decode()
    assert (
        "p95 at most 25.0 ms above prod's, queue not above 100.0, saturation not below 0.25;"
        in page
    )


def test_without_them_the_analysis_has_none(operator, fleet):
    operator.post("/releases/", FORM)
    analysis = Release.objects.get().analysis
    assert (analysis["max_p95_increase_ms"], analysis["metrics"]) == (None, [])


LINE = "Line 1: 'q | up' is not 'name | query | above or below | bound'."


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("max_p95_increase_ms", "-5", "Ensure this value is greater than or equal to 0."),
        ("max_p95_increase_ms", "fast", "Enter a number."),
        ("metrics", "q | up", LINE),
        (
            "metrics",
            "q | up{x='{host}'} | above | 1",
            "metric 1: query: Unknown placeholder {host}",
        ),
        ("metrics", "q | up | sideways | 1", 'metric 1: fail_when: "sideways" is not a valid'),
        ("metrics", "q | up | above | lots", "metric 1: bound: A number is required."),
        ("metrics", "q | up | above | nan", "metric 1: bound: A number is required."),
        ("metrics", "q | up | above | 1\nq | dn | below | 0", "Names must differ: q repeated."),
        ("metrics", "p95 | up | above | 1", "metric 1: name: 'p95' is the analysis' own"),
        ("start_at", "2020-01-01T10:00", "Must be in the future"),
        ("start_at", "tomorrow", "Enter a valid date/time."),
    ],
)
def test_bad_input_shows_on_its_field_and_makes_nothing(
    operator, fleet, prometheus, field, value, message
):
    response = operator.post("/releases/", {**FORM, field: value})
    assert response.status_code == 400
    errors = response.context["form"].errors
    assert list(errors) == [field]
    assert any(error.startswith(message) for error in errors[field]), errors[field]
    assert message.replace("'", "&#x27;").replace('"', "&quot;") in response.content.decode()
    assert not Release.objects.exists()


def test_custom_metrics_without_prometheus_are_refused_on_their_field(operator, fleet):
    response = operator.post("/releases/", {**FORM, "metrics": QUEUE})
    assert response.status_code == 400
    assert response.context["form"].errors["metrics"] == [
        "Custom metrics are read through Prometheus: PROMETHEUS_URL is not set."
    ]


def test_every_refusal_shows_at_once(operator, fleet):
    response = operator.post(
        "/releases/", {**FORM, "interval_s": "1", "start_at": "2020-01-01T10:00"}
    )
    assert set(response.context["form"].errors) == {"interval_s", "start_at"}


def test_a_start_time_makes_the_release_scheduled_and_its_page_starts_it_now(operator, fleet):
    at = (datetime.now(UTC) + timedelta(hours=2)).replace(second=0, microsecond=0)
    response = operator.post("/releases/", {**FORM, "start_at": local_input(at)}, follow=True)
    release = Release.objects.get()
    assert (release.state, release.scheduled_at) == ("scheduled", at)
    assert [e.kind for e in release.events.order_by("at", "id")] == ["created", "scheduled"]
    assert AuditEntry.objects.get(action="release.start").after["state"] == "scheduled"
    page = response.content.decode()
    assert f"Release {release.pk} scheduled: it starts at {at:%Y-%m-%d %H:%M} UTC." in page
    assert f'starts at <strong id="release-scheduled-at">{at:%Y-%m-%d %H:%M:%S} UTC' in page
    assert ">Start now</button>" in page and ">Move the start</button>" in page
    assert f'<tr data-release-id="{release.pk}">' in operator.get("/releases/").content.decode()

    started = operator.post(f"/releases/{release.pk}/start/", follow=True).content.decode()
    release.refresh_from_db()
    assert release.state == "running"
    assert "start done, now running" in started


def test_a_pending_release_is_scheduled_from_its_page(operator, fleet):
    operator.post("/releases/", {k: v for k, v in FORM.items() if k != "start"})
    release = Release.objects.get()
    assert release.state == "pending"
    page = operator.get(f"/releases/{release.pk}/").content.decode()
    assert ">Schedule start</button>" in page and ">Start</button>" in page

    past = operator.post(
        f"/releases/{release.pk}/start/", {"at": "2020-01-01T10:00"}, follow=True
    ).content.decode()
    assert "Start at: Must be in the future" in past
    empty = operator.post(f"/releases/{release.pk}/start/", {"at": ""}, follow=True)
    assert "Start at: Datetime has wrong format." in empty.content.decode()
    assert Release.objects.get().state == "pending"

    at = (datetime.now(UTC) + timedelta(days=1)).replace(second=0, microsecond=0)
    operator.post(f"/releases/{release.pk}/start/", {"at": local_input(at)})
    release.refresh_from_db()
    assert (release.state, release.scheduled_at) == ("scheduled", at)
    assert AuditEntry.objects.get(action="release.start").actor == "olga"


def test_a_viewer_may_not_schedule(client, make_user, fleet, operator):
    operator.post("/releases/", {k: v for k, v in FORM.items() if k != "start"})
    release = Release.objects.get()
    client.logout()
    make_user("vera", "viewer")
    client.login(username="vera", password="pw-for-tests")
    page = client.get(f"/releases/{release.pk}/").content.decode()
    assert 'id="release-schedule"' in page and 'id="release-schedule" class="small" hidden' in page
    at = local_input(datetime.now(UTC) + timedelta(days=1))
    assert client.post(f"/releases/{release.pk}/start/", {"at": at}).status_code == 403
    assert Release.objects.get().state == "pending"


def test_a_bundle_form_takes_them_for_each_of_its_releases(operator, fleet, prometheus):
    response = operator.post(
        "/releases/bundles/",
        {**BUNDLE_FORM, "bundle-max_p95_increase_ms": "40", "bundle-metrics": QUEUE},
    )
    assert response.status_code == 302
    analyses = [release.analysis for release in Release.objects.all()]
    assert len(analyses) == 2
    assert {a["max_p95_increase_ms"] for a in analyses} == {40.0}
    assert {a["metrics"][0]["name"] for a in analyses} == {"queue"}
    refused = operator.post("/releases/bundles/", {**BUNDLE_FORM, "bundle-metrics": "q | up"})
    assert refused.status_code == 400
    assert list(refused.context["bundle_form"].errors) == ["metrics"]
