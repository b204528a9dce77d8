"""POST /api/v1/lifecycle/ (service or gateway token) and
GET /api/v1/services/{name}/lifecycle/ (viewer), and the service page's timeline."""

import pytest
from rest_framework.test import APIClient

from gateways.models import Gateway
from registry_sync.models import LifecycleEvent, Service

pytestmark = pytest.mark.django_db

EVENT = {
    "service": "user-app",
    "host": "10.0.0.5",
    "port": 7201,
    "event": "warmed_up",
    "at": "2026-11-30T05:00:00Z",
    "detail": {"warmup_s": 3.0},
}


def report(client, **changes):
    return client.post("/api/v1/lifecycle/", {**EVENT, **changes}, format="json")


def test_a_service_token_reports_and_a_viewer_lists_newest_first(api):
    fleet = api("service", "fleet")
    assert report(fleet).status_code == 202
    response = report(fleet, event="serving", at="2026-11-30T05:00:01Z", detail={})
    assert response.status_code == 202
    assert response.json()["reporter"] == "fleet"
    viewer = api("viewer")
    listed = viewer.get("/api/v1/services/user-app/lifecycle/").json()
    assert listed["count"] == 2
    first, second = listed["results"]
    assert (first["event"], second["event"]) == ("serving", "warmed_up")
    assert second["detail"] == {"warmup_s": 3.0} and second["port"] == 7201
    since = viewer.get(
        "/api/v1/services/user-app/lifecycle/", {"since": "2026-11-30T05:00:00.500Z"}
    )
    assert [row["event"] for row in since.json()["results"]] == ["serving"]


def test_a_gateway_token_may_report():
    _, token, _ = Gateway.objects.create_with_credentials(name="gw-1", mode=Gateway.PULL)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    response = report(client, event="draining")
    assert response.status_code == 202
    assert response.json()["reporter"] == "gateway:gw-1"


@pytest.mark.parametrize("role, status", [("viewer", 403), ("operator", 403), (None, 403)])
def test_other_roles_may_not_report(api, role, status):
    assert report(api(role)).status_code == status
    assert report(APIClient()).status_code == 401
    assert not LifecycleEvent.objects.exists()


@pytest.mark.parametrize(
    "changes, field",
    [
        ({"event": "exploded"}, "event"),
        ({"port": 0}, "port"),
        ({"port": 70000}, "port"),
        ({"host": ""}, "host"),
        ({"service": "user\napp"}, "service"),
        ({"at": "yesterday"}, "at"),
        ({"detail": [1, 2]}, "detail"),
        ({"detail": {"x": "y" * 5000}}, "detail"),
    ],
)
def test_bad_events_are_400_with_field_messages_and_nothing_is_stored(api, changes, field):
    response = report(api("service"), **changes)
    assert response.status_code == 400
    assert field in response.json()
    assert not LifecycleEvent.objects.exists()


def test_listing_needs_a_viewer_and_a_known_service_and_a_valid_since(api):
    assert api("service").get("/api/v1/services/user-app/lifecycle/").status_code == 403
    viewer = api("viewer")
    assert viewer.get("/api/v1/services/nobody/lifecycle/").status_code == 404
    Service.objects.create(name="quiet-app")
    quiet = viewer.get("/api/v1/services/quiet-app/lifecycle/")
    assert quiet.status_code == 200 and quiet.json()["count"] == 0
    bad = viewer.get("/api/v1/services/quiet-app/lifecycle/", {"since": "soon"})
    assert bad.status_code == 400 and "since" in bad.json()


def test_the_service_page_shows_each_instance_run_with_durations(api, client, make_user):
    Service.objects.create(name="user-app")
    fleet = api("service", "fleet")
    steps = [
        ("starting", "05:00:00", {}),
        ("warmed_up", "05:00:03", {}),
        ("registered", "05:00:03.250", {}),
        ("serving", "05:00:03.250", {}),
        ("draining", "05:01:00", {"in_flight": 4}),
        ("drained", "05:01:01.500", {"in_flight": 0}),
        ("exited", "05:01:02", {}),
    ]
    for event, at, detail in steps:
        assert report(fleet, event=event, at=f"2026-11-30T{at}Z", detail=detail).status_code == 202
    # A second run of another instance that is still warming up.
    report(fleet, port=7202, event="starting", at="2026-11-30T05:02:00Z", detail={})
    make_user("vera", "viewer")
    client.login(username="vera", password="pw-for-tests")
    page = client.get("/services/user-app/").content.decode()
    assert 'id="lifecycle"' in page
    timeline = page[page.index('id="lifecycle"') :]
    assert timeline.index("10.0.0.5:7202") < timeline.index("10.0.0.5:7201")  # newest first
    for label in ("registered", "warmed", "serving", "draining", "in-flight 0", "exited"):
        assert label in timeline
    assert "+3.00 s" in timeline  # warmed, 3 s after starting
    assert "+1.50 s" in timeline  # in-flight 0, 1.5 s into the drain
    assert "62.00 s" in timeline  # the whole run


def test_a_reported_step_goes_to_the_live_pages_and_its_timeline_is_fetched_again(
    api, client, make_user, monkeypatch
):
    import events

    sent = []
    monkeypatch.setattr(events, "publish", lambda *published: sent.extend(published))
    Service.objects.create(name="user-app")
    assert report(api("service", "fleet"), event="starting", detail={}).status_code == 202
    assert [event.as_json() for event in sent] == [
        {
            "type": "lifecycle",
            "service": "user-app",
            "instance": "10.0.0.5:7201",
            "event": "starting",
        }
    ]
    client.force_login(make_user("vera", "viewer"))
    fragment = client.get("/services/user-app/lifecycle/")
    assert fragment.status_code == 200
    html = fragment.content.decode()
    assert '<section class="card" id="lifecycle"' in html and "<html" not in html
    assert "<code>10.0.0.5:7201</code>" in html and "starting" in html
    assert 'data-url="/services/user-app/lifecycle/"' in html
    assert client.get("/services/no-such-app/lifecycle/").status_code == 404
