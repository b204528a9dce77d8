"""Push secrets, Nacos passwords, registry passwords and webhook secrets are encrypted in the
database with GRAYLANE_SECRET_KEYS: another process with the keys reads them back, the
columns never hold them, the migrations encrypt those stored before, and keys rotate."""

import json
import subprocess
import sys

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from accounts.secret_fields import SecretUnreadable
from gateways.models import Gateway
from registry_sync.models import Registry
from releases.models import Webhook
from testing.processes import BASE_DIR, database_url, django_env

OLD_KEY = "Z3JheWxhbmUtVEVTVC1PTkxZLWZlcm5ldC1rZXktMDA="  # the test settings' key
# Unlike OLD_KEY in both halves: a Fernet key is a signing key, then an encryption key, and
# one that shared OLD_KEY's signing half would pass the HMAC of OLD_KEY's tokens and decrypt
# them to noise (now and then with valid padding) instead of refusing them.
NEW_KEY = "R1JBWUxBTkUtdGVzdC1vbmx5LUZFUk5FVC1LRVktMDE="
MIGRATIONS = [
    ("gateways", "0005_encrypt_secrets"),
    ("registry_sync", "0007_encrypt_password"),
    ("releases", "0004_encrypt_webhook_secret"),
]
READ_BACK = """
import json, django
django.setup()
from gateways.models import Gateway
from registry_sync.models import Registry
from releases.models import Webhook
gateway = Gateway.objects.get(name="edge")
print(json.dumps({"push_secret": gateway.push_secret, "nacos_password": gateway.nacos_password,
                  "registry_password": Registry.objects.get(name="nacos").password,
                  "webhook_secret": Webhook.objects.get(name="chat").secret}))
"""


def raw(table: str, column: str, name: str) -> str:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {column} FROM {table} WHERE name = %s", [name])
        return cursor.fetchone()[0]


def in_a_new_process(code: str, keys: str) -> subprocess.CompletedProcess:
    env = django_env(database_url(connection.settings_dict), GRAYLANE_SECRET_KEYS=keys)
    return subprocess.run(
        [sys.executable, *code], cwd=BASE_DIR, env=env, capture_output=True, text=True, timeout=60
    )


def migrations_before_ours(executor: MigrationExecutor) -> list[tuple[str, str]]:
    """The migration each of ours follows in its app (whatever its number now)."""
    nodes = executor.loader.graph.node_map
    return [
        p.key for app, name in MIGRATIONS for p in nodes[(app, name)].parents if p.key[0] == app
    ]


def read_back(keys: str) -> dict:
    done = in_a_new_process(["-c", READ_BACK], keys)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.fixture
def stored(api):
    """A push gateway, a Nacos gateway's password and a registry password, made through
    the API as an admin would, and a webhook's secret."""
    admin = api("admin")
    gateway = admin.post(
        "/api/v1/gateways/",
        {
            "name": "edge",
            "mode": "nacos",
            "endpoint": "http://127.0.0.1:8848/nacos",
            "nacos_username": "nacos",
            "nacos_password": "nacos-pw-123",
        },  # fmt: skip
        format="json",
    )
    assert gateway.status_code == 201, gateway.content
    registry = admin.post(
        "/api/v1/registries/",
        {
            "name": "nacos",
            "kind": "nacos",
            "base_url": "http://127.0.0.1:8848/nacos",
            "username": "nacos",
            "password": "registry-pw-456",
        },  # fmt: skip
        format="json",
    )
    assert registry.status_code == 201, registry.content
    Webhook.objects.create(name="chat", url="http://127.0.0.1:9/hook", secret="hook-secret-789")
    return {
        "push_secret": gateway.json()["push_secret"],
        "nacos_password": "nacos-pw-123",
        "registry_password": "registry-pw-456",
        "webhook_secret": "hook-secret-789",
    }


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_secrets_are_read_back_by_a_new_process_and_not_stored_in_clear(stored):
    assert read_back(OLD_KEY) == stored

    columns = [
        raw("gateways_gateway", "push_secret", "edge"),
        raw("gateways_gateway", "nacos_password", "edge"),
        raw("registry_sync_registry", "password", "nacos"),
        raw("releases_webhook", "secret", "chat"),
    ]
    for column, secret in zip(columns, stored.values(), strict=True):
        assert secret not in column
        assert column.startswith("gAAAAA")  # a Fernet token
    # Nor is any other dump of the rows a way around it.
    with connection.cursor() as cursor:
        cursor.execute("SELECT * FROM gateways_gateway")
        assert not any(stored["push_secret"] in str(value) for value in cursor.fetchone())


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_without_the_key_the_secrets_cannot_be_read(stored):
    done = in_a_new_process(["-c", READ_BACK], NEW_KEY)
    assert done.returncode != 0
    assert "SecretUnreadable: gateways.Gateway.push_secret: no key in GRAYLANE_SECRET_KEYS" in (
        done.stderr
    )
    assert stored["push_secret"] not in done.stderr + done.stdout


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_key_rotation_without_downtime(stored):
    # 1. Every process learns the new key (the old one still encrypts): both read.
    assert read_back(f"{OLD_KEY},{NEW_KEY}") == stored
    # 2. The new key first: it encrypts what is written from now on; both still read.
    rotated = in_a_new_process(["manage.py", "reencrypt_secrets"], f"{NEW_KEY},{OLD_KEY}")
    assert rotated.returncode == 0, rotated.stderr
    assert rotated.stdout.strip() == "Re-encrypted 4 secrets with the first key."
    # 3. The old key can go.
    assert read_back(NEW_KEY) == stored
    assert in_a_new_process(["-c", READ_BACK], OLD_KEY).returncode != 0


@pytest.mark.django_db
def test_an_unread_secret_is_saved_as_it_was_and_a_wrong_key_is_a_clear_error(stored, settings):
    gateway = Gateway.objects.get(name="edge")
    before = raw("gateways_gateway", "push_secret", "edge")
    gateway.last_error = "something"
    gateway.save()
    assert raw("gateways_gateway", "push_secret", "edge") == before

    settings.GRAYLANE_SECRET_KEYS = [NEW_KEY]
    registry = Registry.objects.get(name="nacos")  # loading needs no key
    with pytest.raises(SecretUnreadable, match="registry_sync.Registry.password"):
        registry.password  # noqa: B018


@pytest.mark.django_db(transaction=True)
def test_the_migrations_encrypt_the_secrets_stored_before_them():
    executor = MigrationExecutor(connection)
    before = migrations_before_ours(executor)
    executor.migrate(before)
    old = executor.loader.project_state(before).apps
    old.get_model("gateways", "Gateway").objects.create(
        name="old-edge", mode="nacos", token_hash="0" * 64, token_prefix="00000000",
        push_secret="a" * 64, nacos_password="old-nacos-pw",
    )  # fmt: skip
    old.get_model("gateways", "Gateway").objects.create(
        name="old-pull", token_hash="1" * 64, token_prefix="11111111", push_secret="b" * 64
    )
    old.get_model("registry_sync", "Registry").objects.create(
        name="old-nacos", kind="nacos", base_url="http://127.0.0.1:8848/nacos", password="old-pw"
    )
    old.get_model("releases", "Webhook").objects.create(
        name="old-hook", url="http://127.0.0.1:9/hook", secret="old-hook-secret"
    )
    try:
        executor = MigrationExecutor(connection)
        executor.migrate([executor.loader.graph.leaf_nodes(app)[0] for app, _ in MIGRATIONS])
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())

    edge = Gateway.objects.get(name="old-edge")
    assert (edge.push_secret, edge.nacos_password) == ("a" * 64, "old-nacos-pw")
    assert Gateway.objects.get(name="old-pull").nacos_password == ""  # empty stays empty
    assert raw("gateways_gateway", "nacos_password", "old-pull") == ""
    assert Registry.objects.get(name="old-nacos").password == "old-pw"
    assert "a" * 64 not in raw("gateways_gateway", "push_secret", "old-edge")
    assert "old-nacos-pw" not in raw("gateways_gateway", "nacos_password", "old-edge")
    assert "old-pw" not in raw("registry_sync_registry", "password", "old-nacos")
    assert Webhook.objects.get(name="old-hook").secret == "old-hook-secret"
    assert "old-hook-secret" not in raw("releases_webhook", "secret", "old-hook")


@pytest.mark.django_db(transaction=True)
def test_the_migrations_decrypt_again_when_reversed():
    Registry.objects.create(
        name="back", kind="nacos", base_url="http://127.0.0.1:1/", password="pw"
    )
    executor = MigrationExecutor(connection)
    before = migrations_before_ours(executor)
    try:
        executor.migrate(before)
        assert raw("registry_sync_registry", "password", "back") == "pw"
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
    assert Registry.objects.get(name="back").password == "pw"


@pytest.mark.django_db(transaction=True)  # the endpoint's batch runs in a thread of its own
def test_gateway_calls_never_need_the_keys(api, client, settings):
    """The gateway endpoints load a gateway per call and never read its secrets: a pull
    gateway keeps working even where its secrets cannot be decrypted."""
    created = api("admin").post("/api/v1/gateways/", {"name": "pull-gw"}, format="json").json()
    settings.GRAYLANE_SECRET_KEYS = [NEW_KEY]
    with pytest.raises(SecretUnreadable):
        Gateway.objects.get(name="pull-gw").push_secret  # noqa: B018
    answer = client.get("/api/v1/gateway-config/", HTTP_AUTHORIZATION=f"Token {created['token']}")
    assert answer.status_code == 200
    assert answer.json()["generation"] >= 1
