"""Issue 26: a submission with several bad fields shows every error at once, each on its
field: the form's own checks and the API's (or the engine's) together, nothing made. One
mechanism serves every such form (dashboard.forms.CheckedElsewhere)."""

import pytest
from django.test import Client

from dashboard.forms import LaneForm, PolicyForm
from policy.documents import policy_of
from policy.models import PolicyState
from policy.publishing import load_state
from registry_sync.models import Instance, Service
from releases.models import Release, ReleaseBundle

pytestmark = pytest.mark.django_db

ROLLOUT = {
    "steps": "targeted, 50, 100",
    "interval_s": "60",
    "min_requests": "100",
    "max_error_rate_increase": "1",
    "failures_tolerated": "1",
    "deadline_s": "3600",
}


@pytest.fixture
def operator(make_user):
    service = Service.objects.create(name="user-app")
    for n, version in enumerate(("V1", "V2")):
        Instance.objects.create(service=service, instance_id=f"user-app-{version}",
                                host=f"10.0.{n}.1", port=7201, version=version,
                                state=Instance.UP)  # fmt: skip
    client = Client()
    client.force_login(make_user("olga", "operator"))
    return client


def errors_of(response, name: str = "form") -> dict[str, list[str]]:
    return dict(response.context[name].errors)


def test_a_release_shows_the_forms_and_the_apis_errors_together(operator):
    response = operator.post(
        "/releases/",
        {**ROLLOUT, "service": "user-app", "to_version": "", "steps": "5, lots",
         "interval_s": "0", "mirror": "150", "start_at": "2001-01-01T00:00"},
    )  # fmt: skip
    assert response.status_code == 400
    errors = errors_of(response)
    assert errors["to_version"] == ["This field is required."]
    assert errors["steps"] == ["'lots' is neither 'targeted', 'approval' nor a percentage."]
    assert set(errors) == {"to_version", "steps", "interval_s", "mirror", "start_at"}
    page = response.content.decode()
    for messages in errors.values():
        assert all(str(m).replace("'", "&#x27;") in page for m in messages)
    assert not Release.objects.exists()


def test_a_bundle_shows_the_forms_and_the_apis_errors_together(operator):
    response = operator.post(
        "/releases/bundles/",
        {**{f"bundle-{k}": v for k, v in ROLLOUT.items()}, "bundle-name": "",
         "bundle-releases": "user-app", "bundle-interval_s": "0", "bundle-deadline_s": "x"},
    )  # fmt: skip
    assert response.status_code == 400
    errors = errors_of(response, "bundle_form")
    assert set(errors) == {"name", "releases", "interval_s", "deadline_s"}
    assert not ReleaseBundle.objects.exists()


def test_the_policy_editor_shows_the_forms_and_the_engines_errors_together(operator):
    state = load_state()
    data = PolicyForm.fields_from_policy(policy_of(state.document), state.revision)
    data |= {"enabled": "on", "routing": "on", "comment": "", "action": "save",
             "percent": "lots", "ips": "10.0.0.1\nnot-an-ip", "user_header": ""}  # fmt: skip
    response = operator.post("/policy/", data)
    assert response.status_code == 400
    errors = errors_of(response)
    assert set(errors) == {"percent", "ips", "user_header"}
    assert PolicyState.objects.get().revision == state.revision


def test_a_lane_shows_the_forms_and_the_engines_errors_together(operator):
    state = load_state()
    match = {"header": {"name": "x-lane", "value": "x"}, "ips": [], "cities": [], "users": [],
             "percent": 0}  # fmt: skip
    member = {"version": "V3\x07", "percent": 0, "targeted": True}
    lane = {"priority": 100, "enabled": True, "match": match, "members": {"user-app": member}}
    fields = {"name": "Feature_X", **LaneForm.fields_from_lane(lane, state.revision)}
    data = LaneForm.post_data(fields) | {
        "priority": "soon", "ips": "not-an-ip", "members-1-service": "order-app",
        "comment": "", "action": "save"}  # fmt: skip
    response = operator.post("/lanes/new/", data)
    assert response.status_code == 400
    form = response.context["form"]
    assert set(form.errors) == {"name", "priority", "ips"}
    rows = form.members.forms
    assert set(rows[0].errors) == {"version"} and set(rows[1].errors) == {"version"}
    assert PolicyState.objects.get().revision == state.revision
