"""The lanes pages: the list in the order lanes are tried, the lane editor (preview, publish,
conflict, inline errors, the registry's services and versions as pickers), deletion, the
gray lane's place, viewers read only; which gateways cannot carry a lane, there and on the
gateways page; the simulator's path and hops."""

import json
import re

import pytest

from audit.models import AuditEntry
from dashboard.forms import LaneForm
from gateways import generation, yaml_layout
from gateways.acks import record_acks
from gateways.models import Gateway, Generation
from policy.lanes import lanes_of, routing_of
from policy.models import PolicyState, Revision
from policy.publishing import load_state
from policy.services import create_lane, update_lane, update_policy
from registry_sync.models import Instance, Service

pytestmark = pytest.mark.django_db

FEATURE_X = {
    "priority": 100,
    "match": {"header": {"name": "x-lane", "value": "feature-x"}},
    "members": {"user-app": "V3", "order-app": {"version": "V3", "percent": 0.5}},
}


@pytest.fixture
def fleet():
    """user-app V1 and V3, order-app V1 (and a V3 instance that is down), gray on with the
    seed's header rule."""
    update_policy(
        {"enabled": True, "routing": True, "header": {"name": "gray", "value": "gray-996"}},
        partial=True, actor="seed", source="api", expected_revision=None,
    )  # fmt: skip
    instances = {"user-app": [("V1", "UP"), ("V3", "UP")],
                 "order-app": [("V1", "UP"), ("V3", "DOWN")]}  # fmt: skip
    for name, versions in instances.items():
        service = Service.objects.create(name=name)
        for index, (version, state) in enumerate(versions):
            Instance.objects.create(service=service, instance_id=f"{name}-{index}",
                                    host=f"10.0.{index}.1", port=7201, version=version,
                                    state=state)  # fmt: skip


@pytest.fixture
def operator_client(client, make_user):
    client.force_login(make_user("olga", "operator"))
    return client


@pytest.fixture
def viewer_client(client, make_user):
    client.force_login(make_user("vera", "viewer"))
    return client


def text(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html)).strip()


def lane_form(revision: int, lane: dict, **changes: object) -> dict:
    """What the browser posts for a lane editor showing `lane`, with `changes` typed in."""
    return LaneForm.post_data(LaneForm.fields_from_lane(lane, revision)) | changes


def new_lane_form(revision: int, name: str = "feature-x", **changes: object) -> dict:
    lane = {
        "priority": 100,
        "enabled": True,
        "match": {"header": {"name": "x-lane", "value": name}, "ips": [], "cities": [],
                  "users": [], "percent": 0},
        "members": {"user-app": {"version": "V3", "percent": 0, "targeted": True}},
    }  # fmt: skip
    fields = {"name": name, **LaneForm.fields_from_lane(lane, revision), "comment": ""}
    return LaneForm.post_data(fields) | changes


def test_the_list_shows_every_lane_in_the_order_they_are_tried(viewer_client, fleet):
    create_lane("feature-x", FEATURE_X, actor="bob", source="api")
    create_lane("late", {"priority": 2000, "members": {"user-app": "V9"}}, actor="bob",
                source="api")  # fmt: skip
    create_lane("off", {"priority": 1, "enabled": False}, actor="bob", source="api")
    html = viewer_client.get("/lanes/").content.decode()
    names = re.findall(r'<li class="card lane-card" id="lane-([^"]+)"', html)
    assert names == ["off", "feature-x", "gray", "late"]
    cards = {name: text(card) for name, card in re.findall(
        r'<li class="card lane-card" id="lane-([^"]+)">(.*?)</li>\s*(?=<li class="card|</ol>)',
        html, re.S)}  # fmt: skip
    assert "disabled: not tried" in cards["off"] and cards["off"].split()[0] == "–"
    assert cards["feature-x"].startswith("1 feature-x")
    assert "header x-lane: feature-x" in cards["feature-x"]
    # order-app V3 is known, but no instance of it is routable.
    assert "order-app V3 + 0.5 % entering here no instance" in cards["feature-x"]
    assert "user-app V3 no instance" not in cards["feature-x"]
    assert cards["gray"].startswith("2 gray built-in: the gray policy")
    assert "header gray: gray-996" in cards["gray"] and "Edit in the gray policy" in cards["gray"]
    # V9 of user-app: never registered.
    assert cards["late"].startswith("3 late") and "user-app V9 no instance" in cards["late"]
    assert 'href="/lanes/new/"' not in html  # a viewer makes no lane


def test_the_gray_lane_shows_its_first_members_and_counts_the_rest(viewer_client, fleet):
    Service.objects.bulk_create(Service(name=f"svc-{n:02}") for n in range(25))
    for url in ("/lanes/", "/lanes/gray/edit/"):
        html = viewer_client.get(url).content.decode()
        gray = html[html.index("gray") :]
        assert gray.count('<span class="ver">V2</span>') == 20, url
        assert "and 7 more" in text(gray), url  # 27 services in all


def test_a_new_lane_with_bad_fields_shows_each_error_inline_and_saves_nothing(
    operator_client, fleet
):
    state = load_state()
    # First what the form itself checks: each member row complete, a service once.
    rows = {"members-1-service": "order-app", "members-2-service": "user-app",
            "members-2-version": "V1"}  # fmt: skip
    response = operator_client.post(
        "/lanes/new/", {**new_lane_form(state.revision, **rows), "action": "save"}
    )
    assert response.status_code == 400
    rows = response.context["form"].members.forms
    assert rows[1].errors == {"version": ["Choose the version of this service in the lane."]}
    assert rows[2].errors == {"service": ["user-app is listed twice."]}
    assert "Nothing was saved: fix the fields marked below." in response.content.decode()
    # Then what the engine checks, as the API does, every field at once.
    form = new_lane_form(
        state.revision,
        name="Feature_X",
        priority=-1,
        ips="10.0.0.1\n10.1.2.3/16",
        percent="0.125",
        **{"members-0-version": "V3\x07"},
    )
    response = operator_client.post("/lanes/new/", {**form, "action": "save"})
    assert response.status_code == 400
    page = response.content.decode()
    assert "Nothing was saved: fix the fields marked below." in page
    form = response.context["form"]
    assert form.errors == {
        "name": ["'Feature_X' is not a lane name: 1-63 lower-case letters, digits and '-', "
                 "a letter or digit first."],
        "priority": ["Must be a whole number from 0 to 1000000, got -1."],
        "ips": ["'10.1.2.3/16' has host bits set; did you mean 10.1.0.0/16?"],
        "percent": ["At most two decimals (0.01 % steps), got 0.125."],
    }  # fmt: skip
    assert form.members.forms[0].errors == {
        "version": ["Must be a version: 'V3\\x07' contains control characters."]
    }
    assert 'id="save-button"' not in page
    assert PolicyState.objects.get().revision == state.revision
    # What was typed is kept.
    assert form["ips"].value() == "10.0.0.1\n10.1.2.3/16"


def test_a_new_lane_is_previewed_then_published_as_a_revision(operator_client, fleet):
    state = load_state()
    form = new_lane_form(state.revision, comment="Testers of V3",
                         **{"members-1-service": "order-app", "members-1-version": "V3",
                            "members-1-percent": "0.5"})  # fmt: skip
    response = operator_client.post("/lanes/new/", {**form, "action": "preview"})
    assert response.status_code == 200
    diff = {change["field"]: change.get("after") for change in response.context["diff"]}
    assert diff["name"] == "feature-x" and diff["match.header.value"] == "feature-x"
    assert diff["members.user-app.version"] == "V3" and diff["members.order-app.percent"] == 0.5
    page = response.content.decode()
    assert f"Publish revision {state.revision + 1}" in page
    assert PolicyState.objects.get().revision == state.revision
    # The preview shows the lane as it will be stored, with empty rows for more members.
    rows = [row for row, _ in response.context["member_rows"]]
    assert [row["service"].value() for row in rows] == ["order-app", "user-app", "", "", ""]
    # order-app's V3 has no routable instance: flagged beside it.
    assert [flag for _, flag in response.context["member_rows"]][:2] == ["no instance", None]
    assert 'list="versions-0"' in page and '<datalist id="versions-0">' in page
    assert '<option value="V3" label="no instance">' in page

    response = operator_client.post("/lanes/new/", {**form, "action": "save"})
    assert response.status_code == 302
    assert response["Location"] == f"/revisions/{state.revision + 1}/"
    revision = Revision.objects.get(number=state.revision + 1)
    assert (revision.source, revision.author, revision.comment) == ("ui", "olga", "Testers of V3")
    lane = lanes_of(load_state().document)["feature-x"]
    assert lane["members"]["order-app"] == {"version": "V3", "percent": 0.5, "targeted": True}
    assert lane["match"]["header"] == {"name": "x-lane", "value": "feature-x"}
    assert lane["updated_by"] == "olga"
    entry = AuditEntry.objects.first()
    assert (entry.action, entry.source, entry.object) == (
        "lane.create", "ui", "lane feature-x"
    )  # fmt: skip


def test_a_name_taken_is_an_inline_error(operator_client, fleet):
    create_lane("feature-x", FEATURE_X, actor="bob", source="api")
    state = load_state()
    response = operator_client.post(
        "/lanes/new/", {**new_lane_form(state.revision), "action": "preview"}
    )
    assert response.status_code == 400
    assert response.context["form"].errors == {"name": ["A lane named 'feature-x' exists already."]}


def test_editing_a_lane_publishes_it_and_a_row_removes_a_member(operator_client, fleet):
    create_lane("feature-x", FEATURE_X, actor="bob", source="api")
    state = load_state()
    page = operator_client.get("/lanes/feature-x/edit/")
    assert page.status_code == 200
    form = page.context["form"]
    services = [row["service"].value() or "" for row in form.members]
    assert services == ["order-app", "user-app", "", "", ""]
    lane = routing_of(lanes_of(state.document)["feature-x"])
    data = lane_form(state.revision, lane, users="1001\n1002", comment="")
    data["members-0-DELETE"] = "on"  # order-app leaves the lane
    response = operator_client.post("/lanes/feature-x/edit/", {**data, "action": "preview"})
    assert response.status_code == 200
    assert {"field": "match.users", "added": ["1001", "1002"], "removed": []} in (
        response.context["diff"]
    )
    assert {"field": "members.order-app.version", "before": "V3", "after": None} in (
        response.context["diff"]
    )
    response = operator_client.post("/lanes/feature-x/edit/", {**data, "action": "save"})
    assert response.status_code == 302
    stored = lanes_of(load_state().document)["feature-x"]
    assert stored["match"]["users"] == ["1001", "1002"]
    assert list(stored["members"]) == ["user-app"] and stored["updated_by"] == "olga"


def test_publishing_the_same_lane_again_makes_no_revision(operator_client, fleet):
    create_lane("feature-x", FEATURE_X, actor="bob", source="api")
    state = load_state()
    lane = routing_of(lanes_of(state.document)["feature-x"])
    response = operator_client.post(
        "/lanes/feature-x/edit/", {**lane_form(state.revision, lane, comment=""), "action": "save"}
    )
    assert response.status_code == 302 and response["Location"] == "/lanes/feature-x/edit/"
    assert load_state().revision == state.revision


def test_someone_publishing_first_gives_a_conflict_and_loses_neither_change(operator_client, fleet):
    create_lane("feature-x", FEATURE_X, actor="bob", source="api")
    loaded = load_state()
    lane = routing_of(lanes_of(loaded.document)["feature-x"])
    # bob adds a city and moves the lane meanwhile; olga, on the page loaded before, adds a
    # user and moves it too.
    update_lane("feature-x", {"match": {"cities": ["hangzhou"]}, "priority": 50}, partial=True,
                actor="bob", source="api")  # fmt: skip
    data = lane_form(loaded.revision, lane, users="7", priority=20, comment="")
    response = operator_client.post("/lanes/feature-x/edit/", {**data, "action": "save"})
    assert response.status_code == 409
    assert b'id="conflict"' in response.content
    assert "bob published revision" in text(response.content.decode())
    stored = lanes_of(load_state().document)["feature-x"]
    assert stored["match"]["users"] == [] and stored["priority"] == 50  # nothing of olga's
    form = response.context["form"]
    assert form["revision"].value() == loaded.revision + 1
    assert form["cities"].value() == "hangzhou" and form["users"].value() == "7"
    assert response.context["clashes"] == ["priority"]
    assert {"field": "match.users", "added": ["7"], "removed": []} in response.context["diff"]
    assert all(change["field"] != "match.cities" for change in response.context["diff"])
    # Published from the merged form, both changes stay.
    merged = LaneForm.post_data(
        {**LaneForm.fields_from_lane(routing_of(stored), loaded.revision + 1), "users": "7",
         "priority": 20, "comment": ""}
    )  # fmt: skip
    response = operator_client.post("/lanes/feature-x/edit/", {**merged, "action": "save"})
    assert response.status_code == 302
    final = lanes_of(load_state().document)["feature-x"]
    assert (final["match"]["cities"], final["match"]["users"], final["priority"]) == (
        ["hangzhou"], ["7"], 20
    )  # fmt: skip


def test_a_lane_deleted_meanwhile_is_said_so(operator_client, fleet):
    create_lane("feature-x", FEATURE_X, actor="bob", source="api")
    state = load_state()
    lane = routing_of(lanes_of(state.document)["feature-x"])
    operator_client.post("/lanes/feature-x/delete/", {"revision": state.revision})
    response = operator_client.post(
        "/lanes/feature-x/edit/", {**lane_form(state.revision, lane, comment=""), "action": "save"}
    )
    assert response.status_code == 302 and response["Location"] == "/lanes/"
    messages = [str(m) for m in response.wsgi_request._messages]
    assert messages[-1] == "There is no lane feature-x. Nothing was saved."
    assert "feature-x" not in lanes_of(load_state().document)
    assert operator_client.get("/lanes/feature-x/edit/").status_code == 404


def test_delete_previews_then_publishes_and_a_newer_revision_is_a_conflict(operator_client, fleet):
    create_lane("feature-x", FEATURE_X, actor="bob", source="api")
    loaded = load_state()
    page = operator_client.get("/lanes/feature-x/delete/")
    assert page.status_code == 200
    assert {"field": "priority", "before": 100, "after": None} in page.context["diff"]
    assert f"publish revision {loaded.revision + 1}" in page.content.decode()
    update_lane("feature-x", {"priority": 60}, partial=True, actor="bob", source="api")
    response = operator_client.post("/lanes/feature-x/delete/", {"revision": loaded.revision})
    assert response.status_code == 409
    assert "so nothing was deleted yet" in text(response.content.decode())
    assert {"field": "priority", "before": 60, "after": None} in response.context["diff"]
    assert "feature-x" in lanes_of(load_state().document)
    response = operator_client.post(
        "/lanes/feature-x/delete/", {"revision": loaded.revision + 1, "comment": "Tested."}
    )
    assert response.status_code == 302
    assert "feature-x" not in lanes_of(load_state().document)
    assert Revision.objects.first().comment == "Tested."
    assert operator_client.get("/lanes/gray/delete/").status_code == 404


def test_the_gray_lanes_place_is_edited_here_its_rules_in_the_policy(operator_client, fleet):
    state = load_state()
    page = operator_client.get("/lanes/gray/edit/")
    assert page.status_code == 200
    body = text(page.content.decode())
    assert "header gray: gray-996" in body and "Edit in the gray policy" in body
    # user-app's gray version is the default V2, which it has no instance of.
    assert "user-app V2 no instance" in body
    data = {"revision": state.revision, "priority": 50, "comment": ""}
    preview = operator_client.post("/lanes/gray/edit/", {**data, "action": "preview"})
    assert preview.context["diff"] == [{"field": "priority", "before": 1000, "after": 50}]
    assert operator_client.post("/lanes/gray/edit/", {**data, "action": "save"}).status_code == 302
    after = load_state().document
    assert after["gray_priority"] == 50
    assert {k: v for k, v in after.items() if k != "gray_priority"} == state.document
    response = operator_client.post(
        "/lanes/gray/edit/", {**data, "priority": -5, "action": "preview"}
    )
    assert response.status_code == 400
    assert response.context["form"].errors == {
        "priority": ["Must be a whole number from 0 to 1000000, got -5."]
    }


def test_the_policy_page_says_it_is_the_gray_lane(viewer_client, fleet):
    update_lane("gray", {"priority": 500}, partial=True, actor="bob", source="api")
    page = text(viewer_client.get("/policy/").content.decode())
    assert "These rules and versions are the built-in lane gray" in page
    assert "tried at priority 500 among the lanes" in page


def test_a_viewer_sees_lanes_read_only(viewer_client, fleet):
    create_lane("feature-x", FEATURE_X, actor="bob", source="api")
    state = load_state()
    page = viewer_client.get("/lanes/feature-x/edit/").content.decode()
    assert "You have the viewer role: read only." in page
    assert 'id="preview-button"' not in page and 'id="delete-lane"' not in page
    lane = routing_of(lanes_of(state.document)["feature-x"])
    data = lane_form(state.revision, lane, users="1", comment="")
    for url, body in (("/lanes/feature-x/edit/", {**data, "action": "save"}),
                      ("/lanes/new/", {**new_lane_form(state.revision), "action": "save"}),
                      ("/lanes/feature-x/delete/", {"revision": state.revision}),
                      ("/lanes/gray/edit/", {"revision": state.revision, "priority": 5,
                                             "action": "save"})):  # fmt: skip
        response = viewer_client.post(url, body)
        assert response.status_code == 302, url
    assert load_state().revision == state.revision


def acked_by_a_nacos_and_a_pull_gateway() -> Gateway:
    """gw-nacos runs the newest generation without feature-x, as a Nacos-mode gateway's
    delivery records it (gateways.delivery); gw-pull carries every lane and fronts order-app
    only. Returns gw-pull."""
    number = generation.bump("lanes")
    document = json.loads(Generation.objects.get(number=number).content)
    nacos, _, _ = Gateway.objects.create_with_credentials(
        name="gw-nacos", mode=Gateway.NACOS, endpoint="http://127.0.0.1:8848/nacos"
    )
    pull, _, _ = Gateway.objects.create_with_credentials(name="gw-pull", fronts=["order-app"])
    record_acks({nacos.pk: number, pull.pk: number}, delivered=True,
                skipped={nacos.pk: yaml_layout.left_out(document)})  # fmt: skip
    return pull


def test_gateways_that_cannot_carry_a_lane_are_named_and_a_lane_no_request_enters_flagged(
    operator_client, fleet
):
    create_lane("feature-x", FEATURE_X, actor="bob", source="api")
    pull = acked_by_a_nacos_and_a_pull_gateway()
    page = text(operator_client.get("/lanes/feature-x/edit/").content.decode())
    assert "gw-nacos cannot carry it: a Nacos-mode gateway" in page
    assert ("user-app is fronted only by gateways that cannot carry it (gw-nacos): requests "
            "entering there are decided as if the lane did not exist") in page  # fmt: skip
    assert "order-app is fronted only" not in page and "No request enters this lane" not in page
    lanes = text(operator_client.get("/lanes/").content.decode())
    assert "gw-nacos cannot carry it" in lanes
    # Without the pull gateway, no gateway in front of its services carries the lane.
    pull.delete()
    page = text(operator_client.get("/lanes/feature-x/edit/").content.decode())
    assert "No request enters this lane" in page


def test_the_gateways_page_names_the_lanes_each_gateway_cannot_carry(viewer_client, fleet):
    create_lane("feature-x", FEATURE_X, actor="bob", source="api")
    pull = acked_by_a_nacos_and_a_pull_gateway()
    skipped = [
        {"record": "lanes", "reason": "dict, not a list; no lane applies"},
        {"record": "services.user-app.instances[i9]", "reason": "port: 0 is not a port"},
    ]
    Gateway.objects.filter(pk=pull.pk).update(skipped=skipped)
    html = viewer_client.get("/gateways/").content.decode()
    rows = dict(re.findall(r'<tr data-gateway="([^"]+)">(.*?)</tr>', html, re.S))
    assert re.search(r'<b>cannot carry lane <a href="/lanes/#lane-feature-x">feature-x</a></b>: '
                     r"a Nacos-mode gateway", rows["gw-nacos"])  # fmt: skip
    assert "<b>cannot carry any lane but gray</b>: dict, not a list" in rows["gw-pull"]
    assert "<code>services.user-app.instances[i9]</code>: port: 0 is not a port" in rows["gw-pull"]


def test_the_simulator_takes_a_path_and_answers_each_hop(viewer_client, fleet):
    create_lane("feature-x", FEATURE_X, actor="bob", source="api")
    response = viewer_client.post(
        "/simulate/",
        {"path": "user-app, order-app", "header_name": "x-lane", "header_value": "feature-x"},
    )
    result = response.context["result"]
    assert (result["flag"], result["lane"], result["matched"]) == ("GRAY", "feature-x", "header")
    page = text(response.content.decode())
    assert "Lane feature-x" in page
    hops = re.findall(r"<tr data-hop>(.*?)</tr>", response.content.decode(), re.S)
    assert [text(hop).strip() for hop in hops] == [
        "1 user-app V3 no in lane feature-x member version V3",
        "2 order-app V1 fallback in lane feature-x no routable instance of V3: prod V1 instead",
    ]
    response = viewer_client.post("/simulate/", {"path": "user-app,order-app , pay-app"})
    hops = re.findall(r"<tr data-hop>(.*?)</tr>", response.content.decode(), re.S)
    assert [text(hop) for hop in hops] == [
        "1 user-app V1 no none prod version",
        "2 order-app V1 no none prod version",
        "3 pay-app V1 no none prod version; no routable instance: the gateway answers 503",
    ]
    path = ", ".join(f"s{n}" for n in range(21))
    response = viewer_client.post("/simulate/", {"path": path})
    assert response.context["form"].errors == {"path": ["At most 20 services."]}
