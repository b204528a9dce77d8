"""The releases pages: start a release from the form, its page, the actions (CSRF forms,
operator only) and inline errors."""

import pytest

from policy.publishing import load_state
from releases.models import Release

pytestmark = pytest.mark.django_db

FORM = {
    "service": "user-app",
    "to_version": "V2",
    "steps": "targeted, 5, 25%, 100",
    "interval_s": "5",
    "min_requests": "50",
    "max_error_rate_increase": "1.0",
    "failures_tolerated": "1",
    "deadline_s": "600",
    "start": "on",
}


@pytest.fixture
def signed_in(client, make_user):
    def sign_in(role):
        make_user(f"{role}-p", role)
        client.login(username=f"{role}-p", password="pw-for-tests")
        return client

    return sign_in


def test_start_a_release_from_the_form_and_follow_it(signed_in, fleet):
    client = signed_in("operator")
    response = client.post("/releases/", FORM)
    release = Release.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/releases/{release.pk}/"
    assert release.state == "running"
    assert release.steps == [{"targeted": True}, {"percent": 5}, {"percent": 25}, {"percent": 100}]
    page = client.get(f"/releases/{release.pk}/").content.decode()
    assert 'aria-current="step">targeted users</li>' in page
    assert 'data-action="pause" >' in page or 'data-action="pause">' in page
    assert "started" in page
    response = client.post(f"/releases/{release.pk}/promote/")
    assert response.status_code == 302
    release.refresh_from_db()
    assert release.step == 1
    client.post(f"/releases/{release.pk}/rollback/")
    assert Release.objects.get().state == "rolled_back"
    page = client.get(f"/releases/{release.pk}/", follow=True).content.decode()
    assert "rolled_back" in page
    refused = client.post(f"/releases/{release.pk}/start/", follow=True).content.decode()
    assert "cannot start" in refused
    listing = client.get("/releases/?state=rolled_back").content.decode()
    assert f'href="/releases/{release.pk}/"' in listing
    assert (
        f'href="/releases/{release.pk}/"'
        not in client.get("/releases/?state=running").content.decode()
    )


def test_a_release_in_a_lane_with_fractional_steps_shows_its_lane(signed_in, fleet, api):
    lane = {"name": "feature-x", "priority": 100, "members": {}}
    assert api("operator").post("/api/v1/lanes/", lane, format="json").status_code == 201
    client = signed_in("operator")
    client.post("/releases/", {**FORM, "lane": "feature-x", "steps": "0.5, 2.25, 100"})
    release = Release.objects.get()
    assert (release.lane, release.state) == ("feature-x", "running")
    assert release.steps == [{"percent": 0.5}, {"percent": 2.25}, {"percent": 100}]
    page = client.get(f"/releases/{release.pk}/").content.decode()
    assert "In lane <strong>feature-x</strong>" in page
    assert 'aria-current="step">0.5 %</li>' in page
    listing = client.get("/releases/?lane=feature-x").content.decode()
    assert f'href="/releases/{release.pk}/"' in listing
    assert '<td class="release-lane">feature-x</td>' in listing
    assert (
        f'href="/releases/{release.pk}/"' not in client.get("/releases/?lane=gray").content.decode()
    )
    client.post(f"/releases/{release.pk}/rollback/")
    page = client.get(f"/releases/{release.pk}/").content.decode()
    assert "was quarantined for user-app" in page


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"lane": "nope"}, "No lane named &#x27;nope&#x27;."),
        ({"steps": "0.125, 5"}, "step 1: percent: At most two decimals"),
        ({"steps": "targeted, 50, 5"}, "Percentages must grow"),
        ({"steps": "targeted, lots"}, "neither"),
        ({"steps": "5, 500"}, "step 2: percent: Must be between 0 and 100, got 500."),
        ({"interval_s": "2"}, "greater than or equal to 5"),
        ({"service": "ghost"}, "No service named"),
    ],
)
def test_bad_input_shows_inline_errors_and_makes_nothing(signed_in, fleet, changes, message):
    response = signed_in("operator").post("/releases/", {**FORM, **changes})
    assert response.status_code == 400
    assert message in response.content.decode()
    assert not Release.objects.exists()


def test_a_viewer_sees_no_form_nor_buttons_and_may_not_act(signed_in, fleet, api):
    release = (
        api("operator")
        .post(
            "/api/v1/releases/",
            {"service": "user-app", "to_version": "V2", "steps": [{"percent": 10}]},
            format="json",
        )
        .json()
    )
    client = signed_in("viewer")
    assert 'id="release-form"' not in client.get("/releases/").content.decode()
    page = client.get(f"/releases/{release['id']}/").content.decode()
    assert 'data-can-operate="false"' in page
    assert client.post(f"/releases/{release['id']}/start/").status_code == 403
    assert client.post("/releases/", FORM).status_code == 302
    assert Release.objects.get().state == "pending"


def test_release_decisions_are_markers_on_the_service_chart(signed_in, fleet):
    client = signed_in("operator")
    client.post("/releases/", FORM)
    release = Release.objects.get()  # its id: PostgreSQL's sequences outlive a test
    page = client.get("/services/user-app/").content.decode()
    assert 'id="release-markers"' in page
    assert f"release {release.id} V2: started (step 1)" in page


def test_a_lane_a_release_runs_in_cannot_be_deleted_from_the_pages(signed_in, fleet, api):
    lane = {"name": "feature-x", "priority": 100, "members": {}}
    assert api("operator").post("/api/v1/lanes/", lane, format="json").status_code == 201
    client = signed_in("operator")
    client.post("/releases/", {**FORM, "lane": "feature-x"})
    release = Release.objects.get()
    state = load_state()
    refused = client.post("/lanes/feature-x/delete/", {"revision": state.revision})
    assert refused.status_code == 409
    reason = f"Release {release.pk} of user-app V2 is running in lane feature-x"
    assert reason in refused.content.decode()
    # Nor by rolling back to a revision from before the lane.
    client.post(f"/revisions/{state.revision - 2}/rollback/")
    page = client.get(f"/revisions/{state.revision - 2}/").content.decode()
    assert reason in page
    assert "feature-x" in load_state().document["lanes"]
