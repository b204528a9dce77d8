"""The data migration releases.0007 on a database of the state before it: the schema of
releases.0005, filled through the models of then with what the previous code left (running
releases, overrides at `{"percent": 0, "targeted": false}` after releases ended, and the
revisions that wrote them), migrated forward, read back, and then acted on by this code."""

import json

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from audit.models import AuditEntry
from policy.models import PolicyState, Revision
from releases import services
from releases.models import Release
from routing_engine import canonical_json, checksum, diff_documents

pytestmark = pytest.mark.django_db(transaction=True)

PREVIOUS = [("releases", "0005_renamed_from_rollouts")]
VERSIONS = {"prod": "V1", "gray": "V2"}
GRAY = {
    "enabled": True,
    "routing": True,
    "header": {"name": "gray", "value": "gray-996"},
    "ips": [],
    "cities": [],
    "users": ["1001"],
    "user_header": "X-User-No",
    "city_header": "X-City",
    "percent": 0,
}


def leftover(prod, gray):
    """What the previous code left when a release ended."""
    return {"prod": prod, "gray": gray, "percent": 0, "targeted": False}


def step(prod, gray, percent):
    return {"prod": prod, "gray": gray, "percent": percent, "targeted": True}


@pytest.fixture
def previous():
    """The historical models of the state before releases.0006; the database is migrated
    back to it, and forward again afterwards whatever the test did."""
    executor = MigrationExecutor(connection)
    executor.migrate(PREVIOUS)
    yield executor.loader.project_state(PREVIOUS).apps
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())


def fill(apps):
    """Releases and revisions as the previous code made them; answers the releases by name."""
    Release = apps.get_model("releases", "Release")
    ReleaseEvent = apps.get_model("releases", "ReleaseEvent")
    made = {}
    for name, service, from_version, to_version, state, started in [
        ("order_rolled_back", "order-app", "V1", "V2", "rolled_back", True),
        ("pay_promoted", "pay-app", "V1", "V2", "promoted", True),
        ("mail_aborted", "mail-app", "V1", "V3", "aborted", True),
        ("ship_aborted_pending", "ship-app", "V1", "V2", "aborted", False),
        ("auth_promoted", "auth-app", "V1", "V2", "promoted", True),
        ("user_running", "user-app", "V1", "V2", "running", True),
        ("auth_running", "auth-app", "V2", "V3", "paused", True),
        ("geo_running", "geo-app", "V1", "V2", "insufficient_data", True),
    ]:
        made[name] = Release.objects.create(
            service=service,
            from_version=from_version,
            to_version=to_version,
            state=state,
            steps=[{"targeted": True}, {"percent": 5}],
            analysis={"interval_s": 5},
        )
        if started:
            ReleaseEvent.objects.create(release=made[name], kind="started", step=0)

    services_then = {
        "order-app": leftover("V1", "V2"),
        "pay-app": leftover("V2", "V1"),
        "mail-app": leftover("V1", "V3"),
        "cart-app": {"percent": 0, "targeted": False},  # an operator's, no release's
        "ship-app": leftover("V1", "V2"),  # its release never started: not its leftover
        "auth-app": leftover("V2", "V1"),
    }
    user, auth = made["user_running"].pk, made["auth_running"].pk
    documents = [
        ("Initial default policy.", {**GRAY, "enabled": False}, {}),
        ("", GRAY, services_then),
        (
            f"Release {user} of user-app V2: step 1 of 2: targeted users.",
            GRAY,
            {**services_then, "user-app": step("V1", "V2", 0)},
        ),
        (
            f"Release {auth} of auth-app V3: step 1 of 2: targeted users.",
            GRAY,
            {**services_then, "user-app": step("V1", "V2", 0), "auth-app": step("V2", "V3", 0)},
        ),
        (
            f"Release {auth} of auth-app V3: step 2 of 2: 5 %.",
            GRAY,
            {
                **services_then,
                "user-app": step("V1", "V2", 0),
                "auth-app": step("V2", "V3", 5),
                "geo-app": step("V1", "V2", 5),  # its revisions are not found
            },
        ),
    ]
    Revision = apps.get_model("policy", "Revision")
    previous = None
    for number, (comment, gray, overrides) in enumerate(documents, start=1):
        document = {"gray": gray, "versions": VERSIONS, "services": dict(sorted(overrides.items()))}
        Revision.objects.create(
            number=number,
            content=canonical_json(document),
            checksum=checksum(document),
            diff=diff_documents(previous, document),
            author="olga",
            source="release" if comment.startswith("Release") else "api",
            comment=comment,
        )
        previous = document
    apps.get_model("policy", "PolicyState").objects.create(
        pk=1, revision=len(documents), content=canonical_json(previous), updated_at=timezone.now()
    )
    return {name: release.pk for name, release in made.items()}, previous


def test_running_releases_and_leftovers_move_to_the_new_form(previous):
    made, before = fill(previous)
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())

    def release(name):
        return Release.objects.get(pk=made[name])

    # Releases under way: lane gray, and the routing found before their first revision.
    assert release("user_running").lane == "gray"
    assert release("user_running").routing_before == {"prod": None, "member": {}}
    # auth-app's revision before had the leftover of its promoted release: in the new form.
    assert release("auth_running").routing_before == {"prod": "V2", "member": {}}
    # No revision of geo-app's release: its override's own prod, no gray routing of its own.
    assert release("geo_running").routing_before == {"prod": "V1", "member": {}}
    assert release("order_rolled_back").routing_before is None

    state = PolicyState.objects.get()
    document = state.document
    assert state.revision == 6
    revision = Revision.objects.get(number=6)
    assert (revision.source, revision.author, revision.content) == (
        "release",
        "migration",
        state.content,
    )
    assert revision.checksum == checksum(document)
    assert {change["field"] for change in revision.diff} == {
        "services.order-app.percent",
        "services.order-app.targeted",
        "services.pay-app.gray",
        "services.pay-app.percent",
        "services.pay-app.targeted",
        "services.mail-app.percent",
        "services.mail-app.targeted",
        "quarantined.order-app",
    }
    assert document["services"] == {
        **before["services"],
        "order-app": {"prod": "V1", "gray": "V2"},
        "pay-app": {"prod": "V2"},
        "mail-app": {"prod": "V1", "gray": "V3"},
    }
    assert document["quarantined"] == {"order-app": ["V2"]}

    audits = {
        (entry.action, entry.object): entry
        for entry in AuditEntry.objects.filter(actor="migration", source="migration")
    }
    assert set(audits) == {
        ("release.migrate", f"release {made['user_running']} (user-app V2)"),
        ("release.migrate", f"release {made['auth_running']} (auth-app V3)"),
        ("release.migrate", f"release {made['geo_running']} (geo-app V2)"),
        ("service.quarantine", "service order-app"),
        ("service.versions", "service pay-app"),
        ("service.versions", "service mail-app"),
    }
    quarantine = audits["service.quarantine", "service order-app"]
    assert quarantine.before == {"revision": 5, "override": leftover("V1", "V2")}
    assert quarantine.after == {
        "revision": 6,
        "override": {"prod": "V1", "gray": "V2"},
        "quarantined": ["V2"],
        "release": made["order_rolled_back"],
    }

    # This code acts on the migrated releases: an abort puts back what they found.
    services.act(made["user_running"], "abort", actor="olga", source="api")
    services.act(made["auth_running"], "abort", actor="olga", source="api")
    overrides = PolicyState.objects.get().document["services"]
    assert "user-app" not in overrides
    assert overrides["auth-app"] == {"prod": "V2"}


def test_a_database_with_nothing_to_move_gets_no_revision(previous):
    Revision = previous.get_model("policy", "Revision")
    document = {
        "gray": GRAY,
        "versions": VERSIONS,
        "services": {"cart-app": {"percent": 0, "targeted": False}},
    }
    Revision.objects.create(
        number=1, content=canonical_json(document), checksum=checksum(document), source="api"
    )
    previous.get_model("policy", "PolicyState").objects.create(
        pk=1, revision=1, content=canonical_json(document), updated_at=timezone.now()
    )
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())
    assert PolicyState.objects.get().revision == 1
    assert json.loads(Revision.objects.get().content) == document
    assert not AuditEntry.objects.exists()
