import pytest

from audit.models import AuditEntry
from dashboard.forms import PolicyForm
from policy.documents import policy_of
from policy.models import PolicyState, Revision
from policy.publishing import load_state
from policy.services import update_policy

pytestmark = pytest.mark.django_db


@pytest.fixture
def operator_client(client, make_user):
    make_user("olga", "operator")
    client.login(username="olga", password="pw-for-tests")
    return client


def form_data(state, **changes):
    """What the browser posts: the editor's fields as they load, with `changes` typed in."""
    data = PolicyForm.fields_from_policy(policy_of(state.document), state.revision)
    data.update(
        enabled="on" if data["enabled"] else "",
        routing="on" if data["routing"] else "",
        comment="",
    )
    data.update(changes)
    return {key: value for key, value in data.items() if value != ""}


def test_a_bad_line_shows_an_inline_error_and_saves_nothing(operator_client):
    state = load_state()
    response = operator_client.post(
        "/policy/", form_data(state, ips="10.0.0.1\n10.1.2.3/16", action="save")
    )
    assert response.status_code == 400
    page = response.content.decode()
    assert "did you mean 10.1.0.0/16" in page
    assert "Nothing was saved" in page
    assert PolicyState.objects.get().revision == state.revision


def test_preview_shows_the_diff_without_publishing(operator_client):
    state = load_state()
    response = operator_client.post(
        "/policy/", form_data(state, ips="10.0.0.1\n10.2.0.0/16", action="preview")
    )
    assert response.status_code == 200
    assert response.context["diff"] == [
        {"field": "ips", "added": ["10.0.0.1", "10.2.0.0/16"], "removed": []}
    ]
    assert b"Publish revision 2" in response.content
    assert PolicyState.objects.get().revision == state.revision


def test_publish_creates_a_revision_from_the_ui(operator_client):
    state = load_state()
    response = operator_client.post(
        "/policy/",
        form_data(state, users="1001\n1002", enabled="on", comment="first gray users",
                  action="save"),
    )  # fmt: skip
    assert response.status_code == 302 and response["Location"] == "/revisions/2/"
    revision = Revision.objects.get(number=2)
    assert (revision.source, revision.author, revision.comment) == (
        "ui",
        "olga",
        "first gray users",
    )
    assert revision.config["gray"]["users"] == ["1001", "1002"]
    assert AuditEntry.objects.first().source == "ui"
    page = operator_client.get("/revisions/2/").content.decode()
    assert "1002" in page and "first gray users" in page


def test_someone_saving_first_gives_a_conflict_and_loses_nothing(operator_client):
    state = load_state()
    update_policy(
        {"cities": ["local"], "percent": 10},
        partial=True, actor="bob", source="api", expected_revision=None,
    )  # fmt: skip
    response = operator_client.post(
        "/policy/", form_data(state, users="7", percent=20, action="save")
    )
    assert response.status_code == 409
    assert b'id="conflict"' in response.content
    assert PolicyState.objects.get().document["gray"]["cities"] == ["local"]
    # The operator's edit is rebased onto bob's revision: bob's city stays, the new user is
    # added, and the field both changed is pointed out.
    form = response.context["form"]
    assert form["revision"].value() == 2
    assert form["cities"].value() == "local" and form["users"].value() == "7"
    assert response.context["clashes"] == ["percent"]
    assert {"field": "users", "added": ["7"], "removed": []} in response.context["diff"]
    assert all(change["field"] != "cities" for change in response.context["diff"])
    published = operator_client.post(
        "/policy/", {**form_data(load_state(), users="7", percent=20), "action": "save"}
    )
    assert published.status_code == 302
    final = PolicyState.objects.get().document["gray"]
    assert (final["cities"], final["users"], final["percent"]) == (["local"], ["7"], 20)


def test_a_viewer_cannot_publish(client, make_user):
    make_user("vera", "viewer")
    client.login(username="vera", password="pw-for-tests")
    state = load_state()
    response = client.post("/policy/", form_data(state, users="1", action="save"))
    assert response.status_code == 302
    assert PolicyState.objects.get().revision == state.revision
    assert b"preview-button" not in client.get("/policy/").content


def test_rollback_from_the_ui(operator_client):
    update_policy({"users": ["5"]}, partial=True, actor="bob", source="api", expected_revision=None)
    response = operator_client.post("/revisions/1/rollback/")
    assert response.status_code == 302
    assert Revision.objects.first().content == Revision.objects.get(number=1).content
    assert operator_client.get("/revisions/1/rollback/").status_code == 405


def test_service_versions_form(operator_client):
    from registry_sync.models import Service

    load_state()
    Service.objects.create(name="order-app")
    response = operator_client.post("/services/order-app/", {"gray_version": "V1"})
    assert response.status_code == 400
    assert "must differ" in response.content.decode()
    response = operator_client.post("/services/order-app/", {"gray_version": "V7"})
    assert response.status_code == 302
    assert PolicyState.objects.get().document["services"] == {"order-app": {"gray": "V7"}}


def test_simulator_page(operator_client):
    update_policy(
        {"enabled": True, "header": {"name": "gray", "value": "gray-996"}},
        partial=True, actor="bob", source="api", expected_revision=None,
    )  # fmt: skip
    response = operator_client.post(
        "/simulate/", {"header_name": "gray", "header_value": "gray-996"}
    )
    assert response.context["result"]["flag"] == "GRAY"
    assert b"flag-gray" in response.content


def test_percent_takes_two_decimals_and_refuses_a_third(operator_client):
    state = load_state()
    response = operator_client.post("/policy/", form_data(state, percent="0.125", action="save"))
    assert response.status_code == 400
    assert "At most two decimals (0.01 % steps), got 0.125." in response.content.decode()
    assert PolicyState.objects.get().revision == state.revision
    response = operator_client.post("/policy/", form_data(state, percent="0.25", action="save"))
    assert response.status_code == 302
    assert PolicyState.objects.get().document["gray"]["percent"] == 0.25
