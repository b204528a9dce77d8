"""An installation of the layout before the apps were named for what they hold (the gray policy
in an app labelled `releases`, progressive releases in `rollouts`, the embedded registry's
instances in `registry_sync`) upgrades with a plain `manage.py migrate`.

That version's own code (a `git archive` of it) migrates and fills a database of the test's
own: revisions, a release started with its events and routing revision, a webhook, audit
entries, an embedded-registry instance, a staff user whose group holds view permissions, an
API token, an admin log entry. Then this version's `migrate`, and everything reads back
through the new models, the API and the admin, under the new labels."""

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from django.db import connection

from testing.processes import BASE_DIR, database_url, django_env

pytestmark = pytest.mark.slow

# main just before the renames: the layout an existing installation has.
PREVIOUS_LAYOUT = "ae033d3c4ecf5e4cfc888390a326e774384a203e"

FILL_THE_PREVIOUS_LAYOUT = """
import json
import django
django.setup()
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.auth.models import Group, Permission, User
from django.contrib.contenttypes.models import ContentType
from django.test import Client
from django.utils import timezone
from accounts.models import ApiToken
from registry_sync.models import EmbeddedInstance, Instance, Service
from rollouts.models import Webhook

root = User.objects.create_superuser("root", password="pw-for-tests")
_, key = ApiToken.objects.issue(root)
api = Client(HTTP_AUTHORIZATION=f"Token {key}")

def call(method, path, body=None):
    response = getattr(api, method)(path, body, content_type="application/json")
    assert response.status_code < 300, (path, response.status_code, response.content)
    return response.json()

call("patch", "/api/v1/policy/", {"enabled": True, "routing": True, "users": ["1001"]})
service = Service.objects.create(name="user-app")
for n, version in enumerate(("V1", "V2")):
    Instance.objects.create(service=service, instance_id=f"10.0.0.{n}#7201", host=f"10.0.0.{n}",
                            port=7201, version=version, metadata={"version": version})
release = call("post", "/api/v1/releases/", {"service": "user-app", "to_version": "V2",
               "steps": [{"targeted": True}, {"percent": 50}], "analysis": {"interval_s": 5}})
call("post", f"/api/v1/releases/{release['id']}/start/")
webhook = Webhook.objects.create(name="chat", url="https://hooks.example.org/x",
                                 secret="hook-secret")
# Persistent: an ephemeral one is purged 30 s after its last beat, and the upgrade may take longer.
EmbeddedInstance.objects.create(service="order-app", ip="127.0.0.1", port=7301, ephemeral=False,
                                metadata={"version": "V1"}, last_beat=timezone.now())
auditors = Group.objects.create(name="auditors")
auditors.permissions.add(*Permission.objects.filter(
    content_type__app_label__in=["releases", "rollouts"], codename__startswith="view_"))
User.objects.create_user("stella", password="pw-for-tests", is_staff=True).groups.add(auditors)
LogEntry.objects.create(user=root, content_type=ContentType.objects.get_for_model(Webhook),
                        object_id=str(webhook.pk), object_repr=str(webhook),
                        action_flag=CHANGE, change_message="Changed the secret.")
print(json.dumps({"token": key, "release": release["id"], "webhook": webhook.pk}))
"""

READ_BACK = """
import json, sys
import django
django.setup()
from django.contrib.admin.models import LogEntry
from django.contrib.auth.models import Group, User
from django.contrib.contenttypes.models import ContentType
from django.test import Client
from embedded_registry.models import EmbeddedInstance
from registry_sync.models import Instance, Registry
from registry_sync.sync import sync_registry
from releases.models import Release, Webhook

filled = json.loads(sys.argv[1])
api = Client(HTTP_AUTHORIZATION=f"Token {filled['token']}")
root, stella = Client(), Client()
root.force_login(User.objects.get(username="root"))
stella.force_login(User.objects.get(username="stella"))

def get(path):
    response = api.get(path)
    assert response.status_code == 200, (path, response.status_code, response.content)
    return response.json()

release = filled["release"]
revisions = get("/api/v1/revisions/?page_size=100")["results"]
published = api.patch("/api/v1/policy/", {"users": ["1001", "1002"]},
                      content_type="application/json")
sync_registry(Registry.objects.get(kind="embedded"))
admin_pages = [
    "/admin/policy/policystate/", "/admin/policy/revision/",
    f"/admin/policy/revision/{revisions[0]['revision']}/change/",
    "/admin/releases/release/", f"/admin/releases/release/{release}/change/",
    "/admin/releases/releaseevent/", "/admin/releases/webhook/",
    f"/admin/releases/webhook/{filled['webhook']}/change/", "/admin/releases/webhookdelivery/",
    "/admin/embedded_registry/embeddedinstance/", "/admin/audit/auditentry/",
]
entry = LogEntry.objects.get()
print(json.dumps({
    "revisions": [(r["revision"], r["source"]) for r in revisions],
    "published": (published.status_code, published.json().get("revision")),
    "release": [get(f"/api/v1/releases/{release}/")[key]
                for key in ("service", "lane", "state", "step")],
    "routing_before": Release.objects.get(pk=release).routing_before,
    "events": [e["kind"] for e in get(f"/api/v1/releases/{release}/events/")["results"]],
    "audit": sorted({e["action"] for e in get("/api/v1/audit/?page_size=100")["results"]}),
    "webhook_secret": Webhook.objects.get(name="chat").secret,
    "embedded": [(i.service, i.ip, i.port) for i in EmbeddedInstance.objects.all()],
    "synced": sorted(Instance.objects.filter(service__name="order-app")
                     .values_list("host", "port")),
    "admin": {page: root.get(page).status_code for page in admin_pages},
    "history": root.get(f"/admin/releases/webhook/{filled['webhook']}/history/").content.decode(),
    "stella": {page: stella.get(page).status_code for page in (
        "/admin/releases/release/", "/admin/releases/webhook/", "/admin/policy/revision/")},
    "stella_may": sorted(User.objects.get(username="stella").get_all_permissions()),
    "group": sorted(Group.objects.get(name="auditors").permissions.values_list(
        "content_type__app_label", "codename")),
    "log_entry": [entry.content_type.app_label, str(entry.get_edited_object())],
    "labels": sorted(ContentType.objects.values_list("app_label", flat=True).distinct()),
    "moved": sorted(f"{ct.app_label}.{ct.model}" for ct in ContentType.objects.filter(model__in=[
        "policystate", "revision", "release", "releaseevent", "releasebundle", "webhook",
        "webhookdelivery", "embeddedinstance", "auditentry"])),
}))
"""


def run(args: list[str], cwd: Path, database: str) -> str:
    env = django_env(database, ALLOWED_HOSTS="testserver")
    env.pop("PYTHONPATH", None)  # each checkout imports its own code
    done = subprocess.run(
        [sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=180
    )
    assert done.returncode == 0, f"{args[:3]} in {cwd}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.fixture(scope="module")
def previous_layout(tmp_path_factory) -> Path:
    # git's archive unpacked by tar: tarfile's safe extraction (filter=) needs Python 3.11.4,
    # newer than Debian 12's 3.11.2.
    checkout = tmp_path_factory.mktemp("previous-layout")
    archive = checkout.with_suffix(".tar")
    for args in (
        ["git", "-C", str(BASE_DIR), "archive", "-o", str(archive), PREVIOUS_LAYOUT],
        ["tar", "-xf", str(archive), "-C", str(checkout)],
    ):
        done = subprocess.run(args, capture_output=True, text=True)
        assert done.returncode == 0, f"{' '.join(args[:4])}: {done.stderr}"
    return checkout


@pytest.fixture(scope="module")
def filled_sqlite(previous_layout, tmp_path_factory) -> tuple[Path, dict]:
    """A database file of the previous layout, filled by its code."""
    path = tmp_path_factory.mktemp("upgrade") / "previous.sqlite3"
    run(["manage.py", "migrate", "-v0"], previous_layout, f"sqlite:///{path}")
    filled = run(["-c", FILL_THE_PREVIOUS_LAYOUT], previous_layout, f"sqlite:///{path}")
    return path, json.loads(filled)


@contextmanager
def postgres_database() -> Iterator[str]:
    """A database of the test's own on the PostgreSQL the tests use, empty, dropped after."""
    import psycopg
    from psycopg import sql

    settings = connection.settings_dict
    name = f"{settings['NAME']}_upgrade"
    statement = "DROP DATABASE IF EXISTS {} WITH (FORCE)"
    server = psycopg.connect(
        dbname="postgres",
        user=settings["USER"],
        password=settings.get("PASSWORD") or None,
        host=settings.get("HOST") or "127.0.0.1",
        port=settings.get("PORT") or 5432,
        autocommit=True,
    )
    with server:
        server.execute(sql.SQL(statement).format(sql.Identifier(name)))
        server.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        try:
            yield database_url({**settings, "NAME": name})
        finally:
            server.execute(sql.SQL(statement).format(sql.Identifier(name)))


def upgrade(database: str, first: list[str], filled: dict) -> dict:
    """This version's migrate (after `first`, when it is another command), a second one, the
    migrations check, and what reads back."""
    run(["manage.py", *first], BASE_DIR, database)
    if first != ["migrate"]:
        run(["manage.py", "migrate"], BASE_DIR, database)
    again = run(["manage.py", "migrate"], BASE_DIR, database)
    check = run(["manage.py", "makemigrations", "--check", "--dry-run"], BASE_DIR, database)
    read = json.loads(run(["-c", READ_BACK, json.dumps(filled)], BASE_DIR, database))
    return {"again": again, "check": check, **read}


@pytest.fixture(
    scope="module",
    params=[
        ("sqlite", ["migrate"]),
        # A single app's migrate first: its post_migrate makes the new labels' content types
        # before the rows of the old ones are moved; the two must become one.
        ("sqlite", ["migrate", "accounts"]),
        ("postgresql", ["migrate"]),
    ],
    ids=["sqlite", "sqlite-one-app-first", "postgresql"],
)
def upgraded(request, previous_layout, filled_sqlite, tmp_path_factory) -> Iterator[dict]:
    backend, first = request.param
    if backend == "sqlite":
        path = tmp_path_factory.mktemp("upgraded") / "graylane.sqlite3"
        shutil.copyfile(filled_sqlite[0], path)
        yield upgrade(f"sqlite:///{path}", first, filled_sqlite[1])
        return
    if connection.vendor != "postgresql":
        pytest.skip("needs DATABASE_URL of a PostgreSQL (CI sets it)")
    with postgres_database() as database:
        run(["manage.py", "migrate", "-v0"], previous_layout, database)
        filled = json.loads(run(["-c", FILL_THE_PREVIOUS_LAYOUT], previous_layout, database))
        yield upgrade(database, first, filled)


def test_migrate_upgrades_the_previous_layout_and_everything_reads_back(upgraded):
    assert "No migrations to apply." in upgraded["again"]
    assert "No changes detected" in upgraded["check"]
    # The policy's revisions, the release's own among them, and a new one after the upgrade.
    assert upgraded["revisions"] == [[3, "release"], [2, "api"], [1, "api"]]
    assert upgraded["published"] == [200, 4]
    # The running release is in the gray lane, with the routing it found (releases.0007).
    assert upgraded["release"] == ["user-app", "gray", "running", 0]
    assert upgraded["routing_before"] == {"prod": None, "member": {}}
    assert upgraded["events"] == ["started", "created"]
    assert {"policy.update", "release.create", "release.start"} <= set(upgraded["audit"])
    assert upgraded["webhook_secret"] == "hook-secret"
    # The embedded registry's instance, and the sync reading it through its adapter.
    assert upgraded["embedded"] == [["order-app", "127.0.0.1", 7301]]
    assert upgraded["synced"] == [["127.0.0.1", 7301]]


def test_the_admin_and_the_permissions_follow_the_new_labels(upgraded):
    assert upgraded["admin"] == dict.fromkeys(upgraded["admin"], 200)
    assert "Changed the secret." in upgraded["history"]
    assert upgraded["log_entry"] == ["releases", "chat"]
    # The staff user's group held view permissions of the old apps: they are the new apps'.
    assert upgraded["stella"] == dict.fromkeys(upgraded["stella"], 200)
    assert {
        "policy.view_revision",
        "policy.view_policystate",
        "releases.view_release",
        "releases.view_webhook",
    } <= set(upgraded["stella_may"])
    assert {app for app, _ in upgraded["group"]} == {"policy", "releases"}
    assert upgraded["moved"] == [
        "audit.auditentry",
        "embedded_registry.embeddedinstance",
        "policy.policystate",
        "policy.revision",
        "releases.release",
        "releases.releasebundle",
        "releases.releaseevent",
        "releases.webhook",
        "releases.webhookdelivery",
    ]
    assert "rollouts" not in upgraded["labels"]
