"""Freeze windows (contract "Release outcomes and control"): admins make them; inside one a
policy or lane change of a frozen service is refused with nothing changed, unless an admin
overrides it, audited with the reason."""

from datetime import timedelta

import pytest
from django.utils import timezone

from audit.models import AuditEntry
from policy.models import Freeze
from policy.publishing import load_state
from registry_sync.models import Instance, Service

pytestmark = pytest.mark.django_db


def iso(delta_minutes: float) -> str:
    return (timezone.now() + timedelta(minutes=delta_minutes)).isoformat()


@pytest.fixture
def fleet(api):
    """user-app and order-app running V1 and V2; pay-app running V1 only (no gray version
    that could get traffic), gray routing on."""
    setup = api("operator", "setup")
    body = {"enabled": True, "routing": True, "users": ["1001"]}
    assert setup.patch("/api/v1/policy/", body, format="json").status_code == 200
    for name, versions in {"user-app": ("V1", "V2"), "order-app": ("V1", "V2"),
                           "pay-app": ("V1",)}.items():  # fmt: skip
        service = Service.objects.create(name=name)
        for index, version in enumerate(versions):
            Instance.objects.create(service=service, instance_id=f"{name}-{version}",
                                    host=f"10.0.{index}.1", port=7201, version=version,
                                    state="UP")  # fmt: skip


@pytest.fixture
def admin(api):
    return api("admin", "ada")


@pytest.fixture
def operator(api):
    return api("operator", "olga")


def freeze(client, services=(), minutes=(-5, 60), reason="Black Friday"):
    body = {"starts_at": iso(minutes[0]), "ends_at": iso(minutes[1]),
            "services": list(services), "reason": reason}  # fmt: skip
    return client.post("/api/v1/freezes/", body, format="json")


def test_only_an_admin_makes_a_freeze_and_anyone_reads_them(api, admin, operator, fleet):
    assert freeze(operator).status_code == 403
    made = freeze(admin, ["user-app"])
    assert made.status_code == 201, made.json()
    assert made.json() | {"id": 0, "starts_at": "", "ends_at": "", "created_at": ""} == {
        "id": 0, "starts_at": "", "ends_at": "", "created_at": "",
        "services": ["user-app"], "reason": "Black Friday", "created_by": "ada",
    }  # fmt: skip
    listed = api("viewer").get("/api/v1/freezes/").json()
    assert listed["count"] == 1 and listed["results"][0]["id"] == made.json()["id"]
    entry = AuditEntry.objects.get(action="freeze.create")
    assert entry.actor == "ada" and entry.after["services"] == ["user-app"]


@pytest.mark.parametrize(
    "changes, field",
    [
        ({"ends_at": iso(-10)}, "ends_at"),
        ({"services": ["no-such-app"]}, "services"),
        ({"reason": ""}, "reason"),
        ({"starts_at": "tomorrow"}, "starts_at"),
    ],
)
def test_a_bad_freeze_is_400_and_none_is_made(admin, fleet, changes, field):
    body = {"starts_at": iso(-5), "ends_at": iso(60), "services": [], "reason": "r", **changes}
    answer = admin.post("/api/v1/freezes/", body, format="json")
    assert answer.status_code == 400 and field in answer.json()
    assert not Freeze.objects.exists()


def test_deleting_ends_a_window_under_way_and_removes_one_to_come(admin, operator, fleet):
    now = freeze(admin).json()["id"]
    later = freeze(admin, minutes=(60, 120)).json()["id"]
    assert operator.delete(f"/api/v1/freezes/{now}/").status_code == 403
    ended = admin.delete(f"/api/v1/freezes/{now}/")
    assert ended.status_code == 200
    assert admin.delete(f"/api/v1/freezes/{later}/").status_code == 204
    assert list(Freeze.objects.values_list("pk", flat=True)) == [now]
    assert admin.delete(f"/api/v1/freezes/{now}/").status_code == 409  # over: history
    # The window is over: changes go through again.
    assert operator.patch("/api/v1/policy/", {"users": ["7"]}, format="json").status_code == 200
    assert {e.action for e in AuditEntry.objects.filter(action__startswith="freeze.")} == {
        "freeze.create",
        "freeze.end",
        "freeze.delete",
    }


def test_a_global_rule_change_in_a_freeze_is_409_and_nothing_changes(admin, operator, fleet):
    freeze(admin, ["order-app"])
    revision = load_state().revision
    answer = operator.patch("/api/v1/policy/", {"users": ["1001", "2002"]}, format="json")
    assert answer.status_code == 409
    assert "order-app" in answer.json()["detail"] and "Black Friday" in answer.json()["detail"]
    assert load_state().revision == revision
    assert operator.get("/api/v1/policy/").json()["users"] == ["1001"]


def test_a_change_of_services_not_frozen_goes_through(admin, operator, fleet):
    freeze(admin, ["pay-app"])
    # pay-app has no instance of its gray version: the gray rules cannot change its routing.
    assert operator.patch("/api/v1/policy/", {"users": ["2"]}, format="json").status_code == 200
    answer = operator.patch("/api/v1/services/user-app/", {"percent": 5}, format="json")
    assert answer.status_code == 200
    answer = operator.patch("/api/v1/services/pay-app/", {"percent": 5}, format="json")
    assert answer.status_code == 409


def test_a_window_to_come_does_not_hold_yet(admin, operator, fleet):
    freeze(admin, minutes=(30, 90))
    assert operator.patch("/api/v1/policy/", {"users": ["2"]}, format="json").status_code == 200


def test_lane_changes_of_frozen_members_are_refused(admin, operator, fleet):
    lane = {"name": "feature-x", "priority": 100,
            "match": {"header": {"name": "x-lane", "value": "x"}},
            "members": {"order-app": "V2"}}  # fmt: skip
    assert operator.post("/api/v1/lanes/", lane, format="json").status_code == 201
    freeze(admin, ["order-app"])
    answer = operator.patch("/api/v1/lanes/feature-x/", {"match": {"users": ["9"]}}, format="json")
    assert answer.status_code == 409
    assert operator.delete("/api/v1/lanes/feature-x/").status_code == 409
    # A member's version is a change of that member only.
    members = {"members": {"order-app": "V2", "user-app": "V2"}}
    assert operator.patch("/api/v1/lanes/feature-x/", members, format="json").status_code == 200
    # A new lane, even of user-app only, takes requests ahead of the lanes after it (they
    # fall back to prod for order-app): it is a change of order-app as well.
    other = {**lane, "name": "feature-y", "members": {"user-app": "V2"}}
    assert operator.post("/api/v1/lanes/", other, format="json").status_code == 409


def test_a_revision_rollback_in_a_freeze_is_refused(admin, operator, fleet):
    before = load_state().revision
    assert operator.patch("/api/v1/policy/", {"users": ["5"]}, format="json").status_code == 200
    freeze(admin)
    answer = operator.post(f"/api/v1/revisions/{before}/rollback/", {}, format="json")
    assert answer.status_code == 409
    assert load_state().revision == before + 1


def test_an_admins_override_goes_through_and_is_audited_with_its_reason(admin, operator, fleet):
    window = freeze(admin).json()["id"]
    body = {"users": ["1001", "3003"], "freeze_override": "hotfix for INC-42"}
    assert operator.patch("/api/v1/policy/", body, format="json").status_code == 403
    answer = admin.patch("/api/v1/policy/", body, format="json")
    assert answer.status_code == 200 and answer.json()["users"] == ["1001", "3003"]
    entry = AuditEntry.objects.filter(action="policy.update").first()
    assert entry.actor == "ada"
    assert entry.after["freeze_override"] == {
        "reason": "hotfix for INC-42",
        "freezes": [window],
        "services": ["order-app", "user-app"],
    }
