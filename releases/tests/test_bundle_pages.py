"""The bundle pages: the releases page lists bundles and makes them (validated by the bundle
API's serializer, errors inline), a bundle's page shows its releases in dependency order,
and its actions (CSRF forms, operator only) move them all through releases.bundles."""

import pytest

from audit.models import AuditEntry
from releases.models import Release, ReleaseBundle

pytestmark = pytest.mark.django_db

FORM = {
    "bundle-name": "checkout",
    "bundle-releases": "order-app V2\nuser-app V2 V1\n",
    "bundle-steps": "targeted, 20, 100",
    "bundle-interval_s": "5",
    "bundle-min_requests": "50",
    "bundle-max_error_rate_increase": "1.0",
    "bundle-failures_tolerated": "1",
    "bundle-deadline_s": "600",
}


@pytest.fixture
def signed_in(client, make_user):
    def sign_in(role):
        make_user(f"{role}-b", role)
        client.login(username=f"{role}-b", password="pw-for-tests")
        return client

    return sign_in


def member_states():
    return list(Release.objects.order_by("position").values_list("service", "state", "step"))


def test_make_a_bundle_start_promote_and_roll_it_back_from_its_page(signed_in, fleet):
    client = signed_in("operator")
    response = client.post("/releases/bundles/", FORM)
    bundle = ReleaseBundle.objects.get()
    assert response.status_code == 302
    assert response["Location"] == f"/releases/bundles/{bundle.pk}/"
    assert member_states() == [("order-app", "pending", 0), ("user-app", "pending", 0)]
    assert Release.objects.get(service="order-app").steps == [
        {"targeted": True},
        {"percent": 20},
        {"percent": 100},
    ]
    assert Release.objects.get(service="order-app").analysis["interval_s"] == 5

    listing = client.get("/releases/").content.decode()
    assert f'href="/releases/bundles/{bundle.pk}/">checkout</a>' in listing
    assert f'data-bundle-id="{bundle.pk}"' in listing

    page = client.get(f"/releases/bundles/{bundle.pk}/").content.decode()
    order_app, user_app = Release.objects.order_by("position")
    assert page.index(f'href="/releases/{order_app.pk}/"') < page.index(
        f'href="/releases/{user_app.pk}/"'
    )
    assert 'data-action="start"' in page and 'data-action="abort"' in page
    assert 'data-action="rollback"' not in page  # not allowed while pending

    response = client.post(f"/releases/bundles/{bundle.pk}/start/", follow=True)
    assert "start done, now running" in response.content.decode()
    assert member_states() == [("order-app", "running", 0), ("user-app", "running", 0)]
    page = response.content.decode()
    assert 'data-action="start"' not in page and 'data-action="rollback"' in page

    client.post(f"/releases/bundles/{bundle.pk}/promote/")
    assert member_states() == [("order-app", "running", 1), ("user-app", "running", 1)]

    response = client.post(f"/releases/bundles/{bundle.pk}/rollback/", follow=True)
    assert "rollback done, now rolled_back" in response.content.decode()
    assert member_states() == [("order-app", "rolled_back", 1), ("user-app", "rolled_back", 1)]
    # Audited as the API's actions are, one entry per release, named for the page.
    rollbacks = AuditEntry.objects.filter(action="release.rollback")
    assert sorted(rollbacks.values_list("source", flat=True)) == ["ui", "ui"]
    assert {e.actor for e in rollbacks} == {"operator-b"}

    refused = client.post(f"/releases/bundles/{bundle.pk}/start/", follow=True).content.decode()
    assert "The bundle cannot start" in refused
    assert "every release of the bundle is finished" in refused
    release_page = client.get(f"/releases/{order_app.pk}/").content.decode()
    assert f'href="/releases/bundles/{bundle.pk}/"' in release_page


def test_a_refused_action_changes_no_release(signed_in, fleet):
    client = signed_in("operator")
    client.post("/releases/bundles/", FORM)
    bundle = ReleaseBundle.objects.get()
    client.post(f"/releases/bundles/{bundle.pk}/start/")
    client.post(f"/releases/{Release.objects.get(service='user-app').pk}/pause/")
    page = client.get(f"/releases/bundles/{bundle.pk}/").content.decode()
    assert "mixed" in page
    assert 'data-action="pause"' not in page and 'data-action="rollback"' in page
    refused = client.post(f"/releases/bundles/{bundle.pk}/pause/", follow=True).content.decode()
    assert "user-app is paused" in refused
    assert member_states() == [("order-app", "running", 0), ("user-app", "paused", 0)]


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"bundle-releases": "order-app V2"}, "at least two services"),
        ({"bundle-releases": "order-app V2\norder-app V3"}, "Each service at most once"),
        ({"bundle-releases": "order-app V2\nghost V2"}, "ghost: service: No service named"),
        ({"bundle-releases": "order-app\nuser-app V2"}, "is not &#x27;service new-version"),
        ({"bundle-releases": "order-app V1\nuser-app V2"}, "Must differ from the prod version"),
        ({"bundle-steps": "targeted, 50, 5"}, "Percentages must grow"),
        ({"bundle-steps": "20, 500"}, "step 2: percent: Must be between 0 and 100, got 500."),
        ({"bundle-interval_s": "2"}, "greater than or equal to 5"),
        ({"bundle-name": ""}, "This field is required"),
    ],
)
def test_bad_input_shows_inline_errors_and_makes_nothing(signed_in, fleet, changes, message):
    response = signed_in("operator").post("/releases/bundles/", {**FORM, **changes})
    assert response.status_code == 400
    page = response.content.decode()
    form = page[page.index('id="bundle-form"') :]
    assert message in form[: form.index("</form>")]
    assert 'class="field-error"' in form
    assert not ReleaseBundle.objects.exists() and not Release.objects.exists()


def test_a_viewer_sees_bundles_without_form_nor_buttons_and_may_not_act(signed_in, fleet, api):
    body = {
        "name": "checkout",
        "releases": [
            {"service": "order-app", "to_version": "V2"},
            {"service": "user-app", "to_version": "V2"},
        ],
        "steps": [{"percent": 10}],
    }
    bundle = api("operator").post("/api/v1/release-bundles/", body, format="json").json()
    client = signed_in("viewer")
    listing = client.get("/releases/").content.decode()
    assert f'href="/releases/bundles/{bundle["id"]}/"' in listing
    assert 'id="bundle-form"' not in listing
    page = client.get(f"/releases/bundles/{bundle['id']}/").content.decode()
    assert "order-app" in page and "user-app" in page
    assert 'id="bundle-actions"' not in page and "data-action=" not in page
    assert client.post(f"/releases/bundles/{bundle['id']}/start/").status_code == 403
    assert client.post("/releases/bundles/", FORM).status_code == 403
    assert ReleaseBundle.objects.count() == 1
    assert [state for _, state, _ in member_states()] == ["pending", "pending"]


def test_bundle_pages_need_a_sign_in(client, fleet):
    assert client.get("/releases/bundles/1/").status_code == 302
    assert client.post("/releases/bundles/1/start/").status_code == 302
    assert client.get("/releases/bundles/").status_code == 405
