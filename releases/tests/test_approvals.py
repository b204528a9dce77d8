"""Approval steps: a release that reaches `{"approval": true}` waits in `awaiting_approval`
(routing as at the step before, not analysed) until an operator approves it through the API;
with RELEASE_FOUR_EYES, not its creator."""

import pytest

from audit.models import AuditEntry
from gateways.gateway_document import build_document
from releases.models import Release
from releases.tests.conftest import kinds, tick, traffic

pytestmark = pytest.mark.django_db

GATED = [{"targeted": True}, {"percent": 5}, {"approval": True}, {"percent": 50}, {"percent": 100}]


def create(client, steps=GATED, service="user-app"):
    body = {
        "service": service,
        "to_version": "V2",
        "steps": steps,
        "analysis": {"interval_s": 5, "min_requests": 50, "deadline_s": 600},
    }
    response = client.post("/api/v1/releases/", body, format="json")
    assert response.status_code == 201, response.json()
    return response.json()


def post(client, release, action):
    return client.post(f"/api/v1/releases/{release['id']}/{action}/")


def routing(service="user-app"):
    return build_document(1)["services"].get(service, {})


def test_the_analysis_stops_at_an_approval_step_until_an_operator_approves(api, fleet, record):
    olga = api("operator", "olga")
    made = create(olga)
    assert post(olga, made, "start").json()["state"] == "running"
    release = Release.objects.get(pk=made["id"])
    release.t0 = release.analysed_until - 60
    Release.objects.filter(pk=release.pk).update(analysed_until=release.t0)

    for interval in (0, 1):
        traffic(record, release, interval)
        current = tick(release, interval + 1)
    assert (current.state, current.step) == ("awaiting_approval", 2)
    assert routing()["percent"] == 5  # the step before the approval's
    assert kinds(current)[-2:] == ["analysis", "awaiting_approval"]
    shown = olga.get(f"/api/v1/releases/{release.pk}/").json()
    assert shown["allowed_actions"] == ["pause", "approve", "rollback", "abort"]

    # Healthy figures keep coming: nothing is analysed while it waits.
    traffic(record, release, 2)
    assert tick(release, 3).events.count() == current.events.count()

    approved = post(api("operator", "anna"), made, "approve")
    assert approved.status_code == 200, approved.json()
    assert (approved.json()["state"], approved.json()["step"]) == ("running", 3)
    assert routing()["percent"] == 50
    events = olga.get(f"/api/v1/releases/{release.pk}/events/").json()["results"]
    assert [e["kind"] for e in events[:2]] == ["advanced", "approved"]
    assert events[1]["detail"]["approved_by"] == "anna"
    assert events[1]["step"] == 2
    entry = AuditEntry.objects.get(action="release.approve")
    assert (entry.actor, entry.after) == ("anna", {"state": "running", "step": 3})


def test_a_first_approval_step_waits_before_any_traffic(api, fleet):
    olga = api("operator", "olga")
    made = create(olga, steps=[{"approval": True}, {"percent": 10}, {"percent": 100}])
    before = routing()
    started = post(olga, made, "start").json()
    assert (started["state"], started["step"]) == ("awaiting_approval", 0)
    assert routing() == before
    assert post(olga, made, "approve").json()["state"] == "running"
    assert routing()["percent"] == 10
    # An abort puts back what the release found when it started, before any step.
    assert post(olga, made, "abort").json()["state"] == "aborted"
    assert routing() == before


def test_approving_a_last_approval_step_promotes(api, fleet):
    olga = api("operator", "olga")
    made = create(olga, steps=[{"percent": 50}, {"approval": True}])
    post(olga, made, "start")
    assert post(olga, made, "promote").json()["state"] == "awaiting_approval"
    assert post(olga, made, "approve").json()["state"] == "promoted"
    assert olga.get("/api/v1/services/user-app/").json()["prod_version"] == "V2"


@pytest.mark.parametrize("action", ["start", "resume", "promote"])
def test_awaiting_approval_refuses_other_actions_with_409(api, fleet, action):
    olga = api("operator", "olga")
    made = create(olga, steps=[{"targeted": True}, {"approval": True}, {"percent": 100}])
    post(olga, made, "start")
    assert post(olga, made, "promote").json()["state"] == "awaiting_approval"
    refused = post(olga, made, action)
    assert refused.status_code == 409
    assert "awaiting_approval" in refused.json()["detail"]


def test_approve_is_409_where_nothing_waits_for_it(api, fleet):
    olga = api("operator", "olga")
    made = create(olga)
    assert post(olga, made, "approve").status_code == 409  # pending
    post(olga, made, "start")
    refused = post(olga, made, "approve")
    assert refused.status_code == 409
    assert "running cannot approve" in refused.json()["detail"]


def test_paused_at_an_approval_step_it_resumes_waiting_and_cannot_be_promoted_past_it(api, fleet):
    olga = api("operator", "olga")
    made = create(olga, steps=[{"targeted": True}, {"approval": True}, {"percent": 100}])
    post(olga, made, "start")
    post(olga, made, "promote")
    assert post(olga, made, "pause").json()["state"] == "paused"
    refused = post(olga, made, "promote")
    assert refused.status_code == 409
    assert "waits for an approval" in refused.json()["detail"]
    assert post(olga, made, "resume").json()["state"] == "awaiting_approval"
    assert routing()["percent"] == 0


def test_four_eyes_refuse_the_creator_and_accept_another_operator(api, fleet, settings):
    settings.RELEASE_FOUR_EYES = True
    olga = api("operator", "olga")
    made = create(olga, steps=[{"targeted": True}, {"approval": True}, {"percent": 100}])
    post(olga, made, "start")
    post(olga, made, "promote")
    waiting = olga.get(f"/api/v1/releases/{made['id']}/events/").json()["results"][0]
    assert "other than olga" in waiting["detail"]["reason"]

    refused = post(olga, made, "approve")
    assert refused.status_code == 403
    assert "olga created release" in refused.json()["detail"]
    assert Release.objects.get(pk=made["id"]).state == "awaiting_approval"
    assert not AuditEntry.objects.filter(action="release.approve").exists()
    assert post(api("viewer", "vic"), made, "approve").status_code == 403

    approved = post(api("operator", "anna"), made, "approve")
    assert approved.status_code == 200
    assert approved.json()["state"] == "running"
    assert AuditEntry.objects.get(action="release.approve").actor == "anna"


def test_without_four_eyes_the_creator_may_approve(api, fleet):
    olga = api("operator", "olga")
    made = create(olga, steps=[{"targeted": True}, {"approval": True}, {"percent": 100}])
    post(olga, made, "start")
    post(olga, made, "promote")
    assert post(olga, made, "approve").json()["state"] == "running"


@pytest.mark.parametrize(
    "steps",
    [
        [{"approval": True}],
        [{"percent": 5}, {"approval": True}, {"approval": True}, {"percent": 100}],
        [{"approval": True, "percent": 5}],
        [{"approval": False}, {"percent": 5}],
        [{"percent": 5}, {"approval": True}, {"targeted": True}],
    ],
)
def test_bad_approval_steps_are_400(api, fleet, steps):
    response = api("operator").post(
        "/api/v1/releases/",
        {"service": "user-app", "to_version": "V2", "steps": steps},
        format="json",
    )
    assert response.status_code == 400
    assert "steps" in response.json()


def test_a_bundle_waits_and_is_approved_as_one(api, fleet):
    olga = api("operator", "olga")
    made = olga.post(
        "/api/v1/release-bundles/",
        {
            "name": "checkout",
            "releases": [
                {"service": "order-app", "to_version": "V2"},
                {"service": "user-app", "to_version": "V2"},
            ],
            "steps": [{"targeted": True}, {"approval": True}, {"percent": 100}],
        },
        format="json",
    ).json()
    url = f"/api/v1/release-bundles/{made['id']}"
    olga.post(f"{url}/start/")
    waiting = olga.post(f"{url}/promote/").json()
    assert waiting["state"] == "awaiting_approval"
    assert olga.post(f"{url}/promote/").status_code == 409
    approved = olga.post(f"{url}/approve/").json()
    assert approved["state"] == "running"
    assert [r["step"] for r in approved["releases"]] == [2, 2]


def test_the_releases_form_takes_an_approval_step(client, make_user, fleet):
    make_user("olga", "operator")
    client.login(username="olga", password="pw-for-tests")
    form = {
        "service": "user-app",
        "to_version": "V2",
        "steps": "targeted, approval, 100",
        "interval_s": "60",
        "min_requests": "50",
        "max_error_rate_increase": "1.0",
        "failures_tolerated": "1",
        "deadline_s": "600",
    }
    assert client.post("/releases/", form).status_code == 302
    assert Release.objects.get().steps == [{"targeted": True}, {"approval": True}, {"percent": 100}]
