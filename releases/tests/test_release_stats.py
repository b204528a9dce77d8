"""How releases ended, per service: `GET /api/v1/releases/stats/` and `/metrics` after
releases an operator promoted, rolled back and aborted through the API."""

from datetime import timedelta

import pytest
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from releases.models import Release, ReleaseEvent

pytestmark = pytest.mark.django_db

ONE_STEP = [{"percent": 50}]


def finish(client, service, to_version, action):
    """A one-step release made, started and ended with `action` (operator, API)."""
    body = {"service": service, "to_version": to_version, "steps": ONE_STEP}
    made = client.post("/api/v1/releases/", body, format="json")
    assert made.status_code == 201, made.json()
    pk = made.json()["id"]
    assert client.post(f"/api/v1/releases/{pk}/start/").status_code == 200
    answer = client.post(f"/api/v1/releases/{pk}/{action}/")
    assert answer.status_code == 200, answer.json()
    return pk


def took(pk, seconds):
    """Its promotion `seconds` after its start."""
    started = ReleaseEvent.objects.get(release_id=pk, kind="started").at
    ReleaseEvent.objects.filter(release_id=pk, kind="promoted").update(
        at=started + timedelta(seconds=seconds)
    )


def stats(client, **query):
    response = client.get("/api/v1/releases/stats/", query)
    assert response.status_code == 200, response.json()
    return {row["service"]: row for row in response.json()["services"]}


def scrape(client):
    text = client.get("/metrics").content.decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name.startswith("graylane_release_")
    }


def test_a_promote_and_a_rollback_counted_in_the_api_and_on_metrics(api, fleet, client):
    operator = api("operator", "olga")
    promoted = finish(operator, "user-app", "V2", "promote")
    took(promoted, 90)
    # user-app's prod is V2 now: back to V1, rolled back.
    finish(operator, "user-app", "V1", "rollback")
    finish(operator, "order-app", "V2", "abort")
    # Not finished: not counted.
    operator.post(
        "/api/v1/releases/", {"service": "order-app", "to_version": "V2", "steps": ONE_STEP}
    )

    found = stats(api("viewer"))
    assert found["user-app"] == {
        "service": "user-app",
        "promoted": 1,
        "rolled_back": 1,
        "aborted": 0,
        "failed": 0,
        "finished": 2,
        "change_failure_rate": 50.0,
        "median_seconds_to_promote": 90.0,
    }
    assert found["order-app"]["aborted"] == 1
    assert found["order-app"]["change_failure_rate"] == 0.0
    assert found["order-app"]["median_seconds_to_promote"] is None

    metrics = scrape(client)
    user_app = (("service", "user-app"),)
    assert metrics[("graylane_release_outcomes_total", (("outcome", "promoted"), *user_app))] == 1
    assert (
        metrics[("graylane_release_outcomes_total", (("outcome", "rolled_back"), *user_app))] == 1
    )
    assert metrics[("graylane_release_outcomes_total", (("outcome", "failed"), *user_app))] == 0
    assert metrics[("graylane_release_change_failure_ratio", user_app)] == 0.5
    assert metrics[("graylane_release_promote_seconds_median", user_app)] == 90.0
    order_app = (("service", "order-app"),)
    assert ("graylane_release_promote_seconds_median", order_app) not in metrics


def test_the_median_of_an_odd_and_an_even_number_of_promotions(api, fleet):
    operator = api("operator", "olga")
    # Each promotion makes its version prod: the next one goes back to the other.
    for seconds, version in ((300, "V2"), (60, "V1"), (120, "V2")):
        took(finish(operator, "user-app", version, "promote"), seconds)
    assert stats(operator)["user-app"]["median_seconds_to_promote"] == 120.0
    took(finish(operator, "user-app", "V1", "promote"), 30)
    assert stats(operator)["user-app"]["median_seconds_to_promote"] == 90.0


def test_service_and_since_narrow_it_and_bad_input_is_a_400(api, fleet):
    operator = api("operator", "olga")
    old = finish(operator, "user-app", "V2", "abort")
    Release.objects.filter(pk=old).update(created_at=timezone.now() - timedelta(days=2))
    finish(operator, "order-app", "V2", "abort")
    viewer = api("viewer")
    assert set(stats(viewer)) == {"user-app", "order-app"}
    assert set(stats(viewer, service="user-app")) == {"user-app"}
    since = (timezone.now() - timedelta(days=1)).isoformat()
    assert set(stats(viewer, since=since)) == {"order-app"}
    bad = viewer.get("/api/v1/releases/stats/", {"since": "yesterday"})
    assert bad.status_code == 400
    assert "since" in bad.json()
    assert api(None).get("/api/v1/releases/stats/").status_code == 403


def test_the_releases_page_shows_them(api, fleet, client, make_user):
    operator = api("operator", "olga")
    took(finish(operator, "user-app", "V2", "promote"), 150)
    finish(operator, "user-app", "V1", "rollback")
    make_user("vera", "viewer")
    client.login(username="vera", password="pw-for-tests")
    table = outcomes_table(client.get("/releases/"))
    row = table[table.index('<tr data-service="user-app">') :]
    cells = [cell.split(">")[-1] for cell in row[: row.index("</tr>")].split("</td>")[1:-1]]
    assert cells == ["1", "1", "0", "0", "50 %", "150 s"]
    assert "user-app" not in outcomes_table(client.get("/releases/?service=order-app"))


def outcomes_table(response):
    page = response.content.decode()
    table = page[page.index('id="release-outcomes"') :]
    return table[: table.index("</table>")]
