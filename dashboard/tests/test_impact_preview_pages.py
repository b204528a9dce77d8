"""The editors' preview step shows what the change would do to the sampled requests."""

import re
import time

import pytest

from dashboard.forms import LaneForm, PolicyForm
from policy.documents import policy_of
from policy.publishing import load_state
from policy.services import create_lane, update_policy
from registry_sync.models import Instance, Service
from traffic.samples import TrafficSample
from traffic.tests.conftest import PREVIEW_LIVE

pytestmark = pytest.mark.django_db

LIVE = PREVIEW_LIVE


@pytest.fixture
def operator_client(client, make_user):
    client.force_login(make_user("olga", "operator"))
    return client


@pytest.fixture
def fleet():
    update_policy(LIVE, partial=False, actor="bob", source="api", expected_revision=None)
    service = Service.objects.create(name="user-app")
    for n, version in enumerate(["V1", "V2", "V3"]):
        Instance.objects.create(service=service, instance_id=f"i{n}", host=f"10.0.0.{n}",
                                port=80, version=version, state="UP")  # fmt: skip


@pytest.fixture
def traffic(samples, fleet):
    """1,000 requests of user-app: 20 of u1, 12 of u2, 100 of u3, one each of 868 others."""
    now = time.time()
    counts = {"u1": 20, "u2": 12, "u3": 100} | {f"x{n}": 1 for n in range(868)}
    samples.accept(
        [
            TrafficSample(now, "user-app", "GET", "/", "192.0.2.1", user, "Berlin")
            for user, n in counts.items()
            for _ in range(n)
        ],
        now=now,
    )
    return samples


def text(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html)).strip()


def policy_form(**changes: str) -> dict:
    state = load_state()
    data = PolicyForm.fields_from_policy(policy_of(state.document), state.revision)
    data.update(enabled="on", routing="on", comment="", action="preview", **changes)
    return {key: value for key, value in data.items() if value != "" and value is not False}


def test_the_policy_preview_says_what_moves_and_which_rule_matched_nothing(
    operator_client, traffic
):
    response = operator_client.post("/policy/", policy_form(users="1001\nu1\nu2", cities="Paris"))
    assert response.status_code == 200
    page = text(response.content.decode())
    assert "moves 3.2 % of user-app requests (2 users) to V2" in page
    assert "city `Paris` matched nothing in 15 minutes" in page
    assert "user `1001` matched nothing in 15 minutes" in page  # nobody of that id came
    assert "user `u1`" not in page
    assert load_state().document["gray"]["users"] == ["1001"]  # a preview publishes nothing


def test_without_samples_the_preview_says_so(operator_client, samples, fleet):
    response = operator_client.post("/policy/", policy_form(users="1001\nu1"))
    assert "No samples in the window" in text(response.content.decode())


def test_the_new_lane_preview_shows_its_impact(operator_client, traffic):
    lane = {
        "priority": 100,
        "enabled": True,
        "match": {"header": {"name": "x-lane", "value": "beta"}, "ips": [], "cities": [],
                  "users": ["u3"], "percent": 0},
        "members": {"user-app": {"version": "V3", "percent": 0, "targeted": True}},
    }  # fmt: skip
    fields = {"name": "beta", **LaneForm.fields_from_lane(lane, load_state().revision)}
    data = LaneForm.post_data({**fields, "comment": ""}) | {"action": "preview"}
    page = text(operator_client.post("/lanes/new/", data).content.decode())
    assert "moves 10 % of user-app requests (1 user) to V3" in page
    assert "lane beta: header `x-lane: beta` matched nothing in 15 minutes" in page


def test_moving_the_gray_lane_first_shows_who_it_takes(operator_client, traffic):
    update_policy({**LIVE, "users": ["1001", "u3"]}, partial=False, actor="bob", source="api",
                  expected_revision=None)  # fmt: skip
    create_lane("beta", {"priority": 10, "match": {"users": ["u3"]},
                         "members": {"user-app": "V3"}}, actor="bob", source="api")  # fmt: skip
    data = {"revision": load_state().revision, "priority": 5, "comment": "", "action": "preview"}
    page = text(operator_client.post("/lanes/gray/edit/", data).content.decode())
    # u3 is in both lanes: in beta (V3) while it comes first, in gray (V2) once gray does.
    assert "moves 10 % of user-app requests (1 user) to V2" in page
