"""`manage.py demo_setup --demo` (what `make run` runs before the fleet starts): the demo
gateway and its token, the demo policy on an untouched installation only, the demo lanes
once, and the pages that show them."""

import io

import pytest
from django.core.management import call_command

from audit.models import AuditEntry
from gateways.models import Gateway
from policy.documents import policy_of
from policy.lanes import lanes_of
from policy.publishing import load_state
from policy.services import delete_lane, update_lane, update_policy
from registry_sync.models import Registry, Service

pytestmark = pytest.mark.django_db


@pytest.fixture
def var_dir(settings, tmp_path):
    settings.VAR_DIR = tmp_path
    return tmp_path


def demo_setup(*args: str) -> str:
    out = io.StringIO()
    call_command("demo_setup", *args, stdout=out)
    return out.getvalue()


def polls(client, token: str) -> int:
    return client.get("/api/v1/gateway-config/", HTTP_AUTHORIZATION=f"Token {token}").status_code


@pytest.mark.django_db(transaction=True)  # the gateway endpoints read in threads of their own
def test_the_demo_gateway_is_made_once_and_its_token_kept(client, var_dir):
    demo_setup("--demo")
    token_file = var_dir / "demo-gateway.token"
    token = token_file.read_text().strip()
    assert token_file.stat().st_mode & 0o077 == 0
    gateway = Gateway.objects.get()
    assert (gateway.name, gateway.mode) == ("demo-gateway", Gateway.PULL)
    assert polls(client, token) == 200

    demo_setup("--demo")  # every make run: the same gateway, the same token
    assert Gateway.objects.get().pk == gateway.pk
    assert token_file.read_text().strip() == token

    token_file.unlink()  # the token is lost: a new gateway record with a new token
    demo_setup("--demo")
    new_token = token_file.read_text().strip()
    assert new_token != token and Gateway.objects.get().pk != gateway.pk
    assert polls(client, token) == 401 and polls(client, new_token) == 200
    actions = list(AuditEntry.objects.filter(object__startswith="gateway").values_list("action"))
    assert sorted(a for (a,) in actions) == ["gateway.create", "gateway.create", "gateway.delete"]


def test_the_demo_policy_is_published_on_an_untouched_installation(var_dir):
    assert "Demo policy" in demo_setup("--demo")
    state = load_state()
    policy = policy_of(state.document)
    # Revision 2, the policy; then one per demo lane.
    assert state.revision == 4 and state.updated_by == "demo-setup"
    assert (policy["enabled"], policy["routing"]) == (True, True)
    assert policy["header"] == {"name": "gray", "value": "gray-996"}
    assert (policy["ips"], policy["cities"], policy["users"]) == ([], [], [])
    assert AuditEntry.objects.filter(action="policy.update", actor="demo-setup").count() == 1

    # An operator's edit stands, whatever it is: even back to no rules at all.
    update_policy(
        {"enabled": False, "header": {"name": "", "value": ""}},
        partial=True,
        actor="olga",
        source="ui",
        expected_revision=4,
    )
    again = demo_setup("--demo")
    assert "Demo policy" not in again and "Policy: revision 5 kept as it is" in again
    assert load_state().revision == 5 and policy_of(load_state().document)["enabled"] is False


def test_an_edited_policy_is_never_replaced(var_dir):
    update_policy(
        {"users": ["1001"]}, partial=True, actor="olga", source="ui", expected_revision=None
    )
    demo_setup("--demo")
    policy = policy_of(load_state().document)
    assert policy["users"] == ["1001"] and policy["header"]["name"] == ""
    assert list(AuditEntry.objects.filter(action="policy.update").values_list("actor")) == [
        ("olga",)
    ]


def test_the_demo_lanes_are_made_once_and_an_operators_change_stands(var_dir):
    out = demo_setup("--demo")
    assert "Demo lane feature-x: header x-lane: feature-x → user-app V3, order-app V3" in out
    assert "Demo lane feature-y: header x-lane: feature-y → order-app V3" in out
    lanes = lanes_of(load_state().document)
    assert lanes["feature-x"]["match"]["header"] == {"name": "x-lane", "value": "feature-x"}
    assert {name: lane["members"] for name, lane in lanes.items()} == {
        "feature-x": {
            "order-app": {"version": "V3", "percent": 0, "targeted": True},
            "user-app": {"version": "V3", "percent": 0, "targeted": True},
        },
        "feature-y": {"order-app": {"version": "V3", "percent": 0, "targeted": True}},
    }
    revision = load_state().revision
    assert "Demo lane" not in demo_setup("--demo")  # every make run: nothing new
    assert load_state().revision == revision

    update_lane("feature-x", {"members": {"user-app": "V4"}}, partial=True, actor="olga",
                source="ui")  # fmt: skip
    delete_lane("feature-y", actor="olga", source="ui")
    again = demo_setup("--demo")
    assert "Lane feature-y: deleted before, not made again" in again
    lanes = lanes_of(load_state().document)
    assert set(lanes) == {"feature-x"}
    assert lanes["feature-x"]["members"]["user-app"]["version"] == "V4"
    created = AuditEntry.objects.filter(action="lane.create", actor="demo-setup")
    assert sorted(created.values_list("object", flat=True)) == ["lane feature-x", "lane feature-y"]


def test_without_demo_no_gateway_and_no_policy_change(var_dir):
    demo_setup()
    assert not Gateway.objects.exists() and load_state().revision == 1
    assert lanes_of(load_state().document) == {}
    assert not (var_dir / "demo-gateway.token").exists()


def test_without_demo_an_earlier_runs_gateway_goes_and_an_operators_stays(var_dir, api):
    demo_setup("--demo")
    out = demo_setup()  # DEMO=false make run: nothing runs demo-gateway now
    assert "demo-gateway deleted" in out
    assert not Gateway.objects.exists() and not (var_dir / "demo-gateway.token").exists()
    deleted = AuditEntry.objects.get(action="gateway.delete")
    assert (deleted.actor, deleted.object) == ("demo-setup", "gateway demo-gateway")
    demo_setup("--demo")  # the demo again: a gateway anew, with its token
    assert Gateway.objects.filter(name="demo-gateway").exists()
    assert (var_dir / "demo-gateway.token").exists()

    Gateway.objects.all().delete()
    made = api("admin").post("/api/v1/gateways/", {"name": "demo-gateway", "mode": "pull"})
    assert made.status_code == 201, made.json()
    demo_setup()
    assert Gateway.objects.filter(name="demo-gateway").exists()


@pytest.mark.django_db(transaction=True)
def test_the_overview_shows_the_gateway_and_the_simulator_offers_the_services(
    client, var_dir, make_user
):
    demo_setup("--demo")
    registry, _ = Registry.objects.get_or_create(name="embedded", kind="embedded")
    for name in ("order-app", "user-app"):
        Service.objects.create(name=name, registry=registry)
    make_user("vera", "viewer")
    client.login(username="vera", password="pw-for-tests")

    overview = client.get("/").content.decode()
    assert '<tr data-gateway="demo-gateway">' in overview
    assert 'data-field="status">pending<' in overview  # never polled yet: not in sync

    token = (var_dir / "demo-gateway.token").read_text().strip()
    generation = client.get("/api/v1/gateway-config/", HTTP_AUTHORIZATION=f"Token {token}").json()[
        "generation"
    ]
    acked = client.post(
        "/api/v1/gateways/demo-gateway/ack/",
        {"generation": generation},
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Token {token}",
    )
    assert acked.status_code == 200
    assert 'data-field="status">in_sync<' in client.get("/").content.decode()
    assert 'data-field="status">in_sync<' in client.get("/gateways/").content.decode()

    simulator = client.get("/simulate/").content.decode()
    assert '<input list="service-names" data-services-list name="path"' in simulator
    assert '<option value="order-app"><option value="user-app">' in simulator
