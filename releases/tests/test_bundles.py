"""Release bundles: order-app and user-app (which calls it) released as one."""

import time

import pytest

from gateways.gateway_document import build_document
from releases import services
from releases.models import Release, ReleaseBundle

pytestmark = pytest.mark.django_db

INTERVAL = 5
BODY = {
    "name": "checkout",
    "releases": [
        {"service": "order-app", "to_version": "V2"},
        {"service": "user-app", "to_version": "V2"},
    ],
    "steps": [{"targeted": True}, {"percent": 20}, {"percent": 100}],
    "analysis": {"interval_s": INTERVAL, "min_requests": 50},
}


def routing(service):
    doc = build_document(1)["services"][service]
    return doc["prod"], doc.get("percent"), doc.get("targeted")


def quarantined(service):
    return build_document(1)["services"][service].get("quarantined", [])


@pytest.fixture
def bundle(api, fleet):
    client = api("operator", "olga")
    response = client.post("/api/v1/release-bundles/", BODY, format="json")
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["state"] == "pending"
    assert [r["service"] for r in body["releases"]] == ["order-app", "user-app"]
    return client, body["id"]


def act(client, bundle_id, action):
    return client.post(f"/api/v1/release-bundles/{bundle_id}/{action}/")


def test_actions_apply_to_every_release_together(bundle):
    client, bundle_id = bundle
    assert act(client, bundle_id, "pause").status_code == 409
    started = act(client, bundle_id, "start").json()
    assert started["state"] == "running"
    assert routing("order-app") == ("V1", 0, True) and routing("user-app") == ("V1", 0, True)
    assert act(client, bundle_id, "pause").json()["state"] == "paused"
    assert act(client, bundle_id, "resume").json()["state"] == "running"
    promoted = act(client, bundle_id, "promote").json()
    assert [r["step"] for r in promoted["releases"]] == [1, 1]
    assert routing("order-app")[1] == 20 and routing("user-app")[1] == 20
    back = act(client, bundle_id, "rollback").json()
    assert back["state"] == "rolled_back"
    # Routing as before the bundle (no override of their own), and V2 quarantined for both.
    assert routing("order-app") == routing("user-app") == ("V1", None, None)
    assert quarantined("order-app") == quarantined("user-app") == ["V2"]
    assert act(client, bundle_id, "start").status_code == 409


def test_a_forbidden_action_on_one_member_changes_none(bundle):
    client, bundle_id = bundle
    act(client, bundle_id, "start")
    user_app = Release.objects.get(service="user-app")
    client.post(f"/api/v1/releases/{user_app.pk}/pause/")
    refused = act(client, bundle_id, "pause")
    assert refused.status_code == 409 and "user-app is paused" in refused.json()["detail"]
    assert Release.objects.get(service="order-app").state == "running"


def test_bad_bundles_are_400(api, fleet):
    client = api("operator")
    one = {**BODY, "releases": BODY["releases"][:1]}
    twice = {**BODY, "releases": [BODY["releases"][0], BODY["releases"][0]]}
    ghost = {**BODY, "releases": [*BODY["releases"], {"service": "ghost", "to_version": "V2"}]}
    for body in (one, twice, ghost):
        response = client.post("/api/v1/release-bundles/", body, format="json")
        assert response.status_code == 400
        assert "releases" in response.json()
    assert not ReleaseBundle.objects.exists() and not Release.objects.exists()


def analysed(record, t0, interval, gray_errors, services_with_traffic):
    first = t0 + interval * INTERVAL
    for service in services_with_traffic:
        record("V2", first, INTERVAL, 100, gray_errors.get(service, 0), service=service)
        record("V1", first, INTERVAL, 100, 0, service=service)
    services.analyse_due(now=first + INTERVAL + services.REPORT_LAG_SECONDS)


def test_the_bundle_advances_when_all_are_healthy_and_falls_back_together(bundle, record, windows):
    client, bundle_id = bundle
    act(client, bundle_id, "start")
    t0 = int(time.time()) - 60
    Release.objects.update(analysed_until=t0)
    # Only order-app has traffic: healthy, but it waits for user-app.
    analysed(record, t0, 0, {}, ["order-app"])
    order, user = Release.objects.get(service="order-app"), Release.objects.get(service="user-app")
    assert (order.step, order.ready_at_step, user.state) == (0, 0, "insufficient_data")
    assert order.events.first().detail["waiting_for"] == ["user-app"]
    # Both healthy: both advance, in dependency order.
    analysed(record, t0, 1, {}, ["order-app", "user-app"])
    assert [r.step for r in Release.objects.order_by("position")] == [1, 1]
    # user-app answers 30 % errors: it is rolled back, and order-app with it.
    analysed(record, t0, 2, {"user-app": 30}, ["order-app", "user-app"])
    analysed(record, t0, 3, {"user-app": 30}, ["order-app", "user-app"])
    states = dict(Release.objects.values_list("service", "state"))
    assert states == {"order-app": "rolled_back", "user-app": "rolled_back"}
    reason = Release.objects.get(service="order-app").events.first().detail["reason"]
    assert reason == "user-app of the same bundle was rolled back"
    assert routing("order-app") == ("V1", None, None)
    assert quarantined("order-app") == ["V2"]
