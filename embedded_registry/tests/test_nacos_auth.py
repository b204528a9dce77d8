"""Who may use the embedded registry: Nacos' login and accessToken (over real loopback
HTTP, and with the real nacos-sdk-python client), Graylane API tokens, the `service` role,
the audit of changes, and EMBEDDED_REGISTRY_AUTH=false opening loopback only."""

import io
import logging
import urllib.error
from urllib.parse import urlencode

import httpx
import nacos
import pytest
from django.contrib.auth.models import Group
from django.core import signing
from django.core.management import call_command
from django.db import connection
from django.db.migrations.loader import MigrationLoader
from nacos.exception import NacosException

from accounts.models import ApiToken
from accounts.roles import VIEWER, has_role, role_of
from audit.models import AuditEntry
from embedded_registry import nacos_auth
from embedded_registry.models import EmbeddedInstance
from embedded_registry.nacos_auth import SALT
from testing.processes import free_port

logging.getLogger("nacos").setLevel(logging.CRITICAL)

INSTANCE = {"serviceName": "user-app", "ip": "10.0.0.5", "port": "7201"}
LOGIN, NAMING, LIST = "/nacos/v1/auth/login", "/nacos/v1/ns/instance", "/nacos/v1/ns/instance/list"


def login(base: str, username: str, password: str = "pw-for-tests") -> httpx.Response:
    return httpx.post(f"{base}{LOGIN}", data={"username": username, "password": password})


def api_token(user) -> str:
    return ApiToken.objects.issue(user)[1]


# Over real HTTP, with the real client


@pytest.mark.django_db(transaction=True)
def test_an_anonymous_register_gets_nacos_403_and_registers_nothing(live_server):
    response = httpx.post(f"{live_server.url}{NAMING}", params=INSTANCE)
    assert (response.status_code, response.text) == (403, "user not found!")
    assert response.headers["content-type"].startswith("text/plain")
    for method, path in (("PUT", NAMING), ("DELETE", NAMING), ("PUT", f"{NAMING}/beat"),
                         ("GET", LIST)):  # fmt: skip
        answer = httpx.request(method, f"{live_server.url}{path}", params=INSTANCE)
        assert (answer.status_code, answer.text) == (403, "user not found!"), (method, path)
    # The real client without credentials is refused the way it handles Nacos' 403.
    anonymous = nacos.NacosClient(live_server.url.removeprefix("http://"), namespace="public")
    with pytest.raises(NacosException, match="Insufficient privilege"):
        anonymous.add_naming_instance("user-app", "10.0.0.5", 7201, cluster_name="DEFAULT")
    assert not EmbeddedInstance.objects.exists()
    assert not AuditEntry.objects.filter(source="registry").exists()


@pytest.mark.django_db(transaction=True)
def test_login_answers_a_nacos_access_token_that_opens_the_naming_api(live_server, make_user):
    make_user("fleet", "service")
    response = login(live_server.url, "fleet")
    assert response.status_code == 200
    body = response.json()
    assert body["tokenTtl"] == 18000 and body["globalAdmin"] is False
    assert body["username"] == "fleet" and body["accessToken"]
    assert response.headers["Authorization"] == f"Bearer {body['accessToken']}"
    token = body["accessToken"]
    registered = httpx.post(f"{live_server.url}{NAMING}", params={**INSTANCE, "accessToken": token})
    assert (registered.status_code, registered.text) == (200, "ok")
    # As a form field too, and as a bearer header; also at the Java client's login path.
    listed = httpx.get(f"{live_server.url}{LIST}", params={"serviceName": "user-app"},
                       headers={"Authorization": f"Bearer {token}"})  # fmt: skip
    assert [h["ip"] for h in listed.json()["hosts"]] == ["10.0.0.5"]
    deregistered = httpx.request(
        "DELETE",
        f"{live_server.url}{NAMING}",
        content=str(httpx.QueryParams({**INSTANCE, "accessToken": token})),
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert deregistered.text == "ok" and not EmbeddedInstance.objects.exists()
    java_path = httpx.post(
        f"{live_server.url}/nacos/v1/auth/users/login",
        params={"username": "fleet"},
        data={"password": "pw-for-tests"},
    )
    assert java_path.status_code == 200 and java_path.json()["accessToken"]


@pytest.mark.django_db(transaction=True)
def test_a_bad_login_is_nacos_403_unknown_user_and_the_real_client_fails(live_server, make_user):
    make_user("fleet", "service")
    for username, password in (("fleet", "wrong"), ("nobody", "pw-for-tests"), ("", "")):
        response = login(live_server.url, username, password)
        assert (response.status_code, response.text) == (403, "unknown user!")
    with pytest.raises(urllib.error.HTTPError) as refused:
        nacos.NacosClient(
            live_server.url.removeprefix("http://"), username="fleet", password="wrong"
        )
    assert refused.value.code == 403


@pytest.mark.django_db(transaction=True)
def test_the_real_client_logged_in_as_a_service_user_registers_and_is_audited(
    live_server, make_user
):
    make_user("fleet", "service")
    client = nacos.NacosClient(
        live_server.url.removeprefix("http://"), username="fleet", password="pw-for-tests"
    )
    where = {"service_name": "user-app", "ip": "10.0.0.5", "port": 7201, "cluster_name": "DEFAULT"}
    assert client.add_naming_instance(**where, metadata={"version": "V1"})
    assert client.send_heartbeat(**where)["code"] == 10200
    assert client.modify_naming_instance(**where, weight=2.0, metadata={"version": "V1"})
    assert client.remove_naming_instance(**where)
    entries = list(AuditEntry.objects.order_by("id"))
    assert [(e.actor, e.source, e.action) for e in entries] == [
        ("fleet", "registry", "instance.register"),
        ("fleet", "registry", "instance.update"),
        ("fleet", "registry", "instance.deregister"),
    ]  # the beat is not audited
    register, update, deregister = entries
    assert register.object == "instance user-app 10.0.0.5:7201"
    assert register.before is None and register.after["metadata"] == {"version": "V1"}
    assert (update.before["weight"], update.after["weight"]) == (1.0, 2.0)
    assert deregister.before["weight"] == 2.0 and deregister.after is None


# Tokens and roles (Django's test client: REMOTE_ADDR 127.0.0.1 unless told)


def form_post(client, path: str, params: dict, **extra):
    """As Nacos clients send forms: urlencoded (the test client's default is multipart)."""
    return client.post(
        path, urlencode(params), content_type="application/x-www-form-urlencoded", **extra
    )


def naming(client, token=None, **extra):
    params = {**INSTANCE, **({"accessToken": token} if token is not None else {})}
    return form_post(client, NAMING, params, **extra)


def token_of(client, username: str) -> str:
    response = form_post(client, LOGIN, {"username": username, "password": "pw-for-tests"})
    assert response.status_code == 200, response.content
    return response.json()["accessToken"]


@pytest.mark.django_db
def test_an_expired_access_token_is_refused(client, make_user, settings, registry_clock):
    ttl = settings.EMBEDDED_REGISTRY_TOKEN_TTL
    make_user("fleet", "service")
    token = token_of(client, "fleet")
    assert naming(client, token).status_code == 200
    registry_clock.advance(ttl - 1)  # the signature's timestamp counts whole seconds
    assert naming(client, token).status_code == 200
    registry_clock.advance(2)
    response = naming(client, token)
    assert (response.status_code, response.content) == (403, b"token expired!")


@pytest.mark.django_db
def test_access_tokens_are_what_they_were_before_the_registry_had_its_clock(client, make_user):
    """Django's TimestampSigner made them: one it made still opens the registry, and it
    reads the tokens made now."""
    make_user("fleet", "service")
    signer = signing.TimestampSigner(salt=SALT)
    value = signer.unsign(token_of(client, "fleet"))
    assert naming(client, signer.sign(value)).status_code == 200


@pytest.mark.django_db
def test_invalid_tokens_are_refused_with_nacos_texts(client, make_user):
    make_user("fleet", "service")
    token = token_of(client, "fleet")
    for bad in (token[:-1] + ("A" if token[-1] != "A" else "B"), "not-a-token",
                "1:abc:1:forged"):  # fmt: skip
        response = naming(client, bad)
        assert (response.status_code, response.content) == (403, b"token invalid!"), bad
    assert naming(client, "").content == b"user not found!"
    assert not EmbeddedInstance.objects.exists()


@pytest.mark.django_db
def test_a_token_ends_with_a_new_password_a_deactivated_user_or_a_lost_role(client, make_user):
    user = make_user("fleet", "service")
    token = token_of(client, "fleet")
    assert naming(client, token).status_code == 200
    user.set_password("another-password")
    user.save()
    assert naming(client, token).content == b"token invalid!"

    user.set_password("pw-for-tests")
    user.save()
    token = token_of(client, "fleet")
    user.groups.clear()
    assert (naming(client, token).status_code, naming(client, token).content) == (
        403,
        b"authorization failed!",
    )
    user.groups.add(Group.objects.get(name="service"))
    user.is_active = False
    user.save()
    assert naming(client, token).content == b"token invalid!"


@pytest.mark.django_db
def test_an_api_token_of_a_service_user_is_an_access_token(client, make_user):
    key = api_token(make_user("fleet", "service"))
    assert naming(client, key).content == b"ok"
    listed = client.get(LIST, {"serviceName": "user-app"}, HTTP_AUTHORIZATION=f"Bearer {key}")
    assert [h["ip"] for h in listed.json()["hosts"]] == ["10.0.0.5"]
    assert AuditEntry.objects.get().actor == "fleet"
    assert ApiToken.objects.get().last_used_at is not None


@pytest.mark.django_db
@pytest.mark.parametrize(
    "role,allowed", [(None, False), ("viewer", False), ("operator", False), ("admin", True)]
)
def test_other_roles_on_the_registry_only_admin(client, make_user, role, allowed):
    """Registering instances is the `service` role's job; an admin may do everything."""
    user = make_user(f"{role}-user", role)
    response = naming(client, api_token(user))
    assert response.status_code == (200 if allowed else 403)
    login_answer = form_post(client, LOGIN, {"username": user.username, "password": "pw-for-tests"})
    if allowed:
        assert login_answer.json()["globalAdmin"] is True
    else:
        assert (response.content, login_answer.status_code, login_answer.content) == (
            b"authorization failed!",
            403,
            b"authorization failed!",
        )


@pytest.mark.django_db
def test_an_issued_service_token_opens_the_registry_and_nothing_else(client):
    from django.contrib.auth.models import User
    from rest_framework.test import APIClient

    out = io.StringIO()
    call_command("issue_token", "fleet", "--role", "service", stdout=out, stderr=io.StringIO())
    key = out.getvalue().strip().splitlines()[-1]
    assert naming(client, key).content == b"ok"

    user = User.objects.get(username="fleet")
    assert role_of(user) is None and not has_role(user, VIEWER)
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    for path in ("/api/v1/policy/", "/api/v1/services/", "/api/v1/registries/", "/api/v1/audit/"):
        assert api.get(path).status_code == 403, path
    assert api.patch("/api/v1/policy/", {"percent": 5}, format="json").status_code == 403
    client.force_login(user)
    for path in ("/", "/policy/", "/services/", "/revisions/", "/audit/", "/gateways/"):
        assert client.get(path).status_code == 403, path


@pytest.mark.django_db
def test_the_service_role_exists_after_migrating():
    """The migration that makes the role is applied, and makes it. (Not read off the test
    database as it stands: a transactional test run before this one flushed its groups.)"""
    loader = MigrationLoader(connection)
    key = ("accounts", "0003_service_role")
    assert key in loader.applied_migrations
    Group.objects.filter(name="service").delete()
    loader.get_migration(*key).operations[0].code(loader.project_state(key).apps, None)
    assert Group.objects.filter(name="service").exists()


# EMBEDDED_REGISTRY_AUTH=false: loopback only


@pytest.mark.django_db
def test_auth_on_refuses_anonymous_loopback_too(client):
    assert naming(client).content == b"user not found!"


@pytest.mark.django_db
@pytest.mark.parametrize("address", ["127.0.0.1", "127.8.9.10", "::1", "::ffff:127.0.0.1"])
def test_auth_off_opens_the_registry_to_loopback(client, settings, address):
    settings.EMBEDDED_REGISTRY_AUTH = False
    response = naming(client, REMOTE_ADDR=address)
    assert (response.status_code, response.content) == (200, b"ok")
    listed = client.get(LIST, {"serviceName": "user-app"}, REMOTE_ADDR=address)
    assert len(listed.json()["hosts"]) == 1
    entry = AuditEntry.objects.get()
    assert (entry.actor, entry.action) == ("anonymous", "instance.register")


@pytest.mark.django_db
@pytest.mark.parametrize(
    "extra",
    [
        {"REMOTE_ADDR": "10.1.2.3"},
        {"REMOTE_ADDR": "192.168.0.7"},
        {"REMOTE_ADDR": "::ffff:10.1.2.3"},
        {"REMOTE_ADDR": "127.0.0.1", "HTTP_X_FORWARDED_FOR": "203.0.113.9"},
        {"REMOTE_ADDR": "127.0.0.1", "HTTP_FORWARDED": "for=203.0.113.9"},
    ],
)
def test_auth_off_still_wants_credentials_from_anywhere_else(client, settings, make_user, extra):
    settings.EMBEDDED_REGISTRY_AUTH = False
    response = naming(client, **extra)
    assert (response.status_code, response.content) == (403, b"user not found!")
    assert not EmbeddedInstance.objects.exists()
    make_user("fleet", "service")
    assert naming(client, token_of(client, "fleet"), **extra).content == b"ok"


@pytest.mark.django_db
def test_auth_off_still_checks_credentials_that_are_sent(client, settings):
    settings.EMBEDDED_REGISTRY_AUTH = False
    assert naming(client, "not-a-token").content == b"token invalid!"


# username + password on the call itself (no accessToken), as the Node.js SDK sends them


def with_password(client, password="pw-for-tests", username="fleet", **extra):
    return form_post(client, NAMING, {**INSTANCE, "username": username, "password": password},
                     **extra)  # fmt: skip


@pytest.mark.django_db
def test_username_and_password_on_a_call_open_the_registry_audited_under_the_user(
    client, make_user
):
    make_user("fleet", "service")
    assert (with_password(client).status_code, with_password(client).content) == (200, b"ok")
    listed = client.get(LIST, {"serviceName": "user-app", "username": "fleet",
                               "password": "pw-for-tests"})  # fmt: skip
    assert [h["ip"] for h in listed.json()["hosts"]] == ["10.0.0.5"]
    assert {e.actor for e in AuditEntry.objects.all()} == {"fleet"}
    # An accessToken, when sent, is what counts (as in Nacos): a bad one is not rescued.
    params = {**INSTANCE, "username": "fleet", "password": "pw-for-tests", "accessToken": "x"}
    assert form_post(client, NAMING, params).content == b"token invalid!"


@pytest.mark.django_db
def test_wrong_username_or_password_on_a_call_is_nacos_403_unknown_user(client, make_user):
    make_user("fleet", "service")
    make_user("viewer", VIEWER)
    for username, password in (("fleet", "wrong"), ("nobody", "pw-for-tests"), ("fleet", ""),
                               ("", "pw-for-tests")):  # fmt: skip
        response = with_password(client, password, username)
        assert (response.status_code, response.content) == (403, b"unknown user!")
    assert with_password(client, username="viewer").content == b"authorization failed!"
    assert not EmbeddedInstance.objects.exists()


@pytest.mark.django_db
def test_wrong_passwords_on_calls_lock_the_username_out_like_the_login(client, make_user, settings):
    settings.AXES_ENABLED = True  # off for the rest of the suite (graylane/test_settings.py)
    make_user("fleet", "service")
    assert with_password(client).status_code == 200  # remembered: the lock must still win
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        assert with_password(client, "wrong").status_code == 403
    locked = with_password(client, "wrong")
    assert locked.status_code == 429 and "locked" in locked.json()["detail"]
    assert with_password(client).status_code == 429  # even the right password, until cool-off
    login_locked = form_post(client, LOGIN, {"username": "fleet", "password": "pw-for-tests"})
    assert login_locked.status_code == 429
    assert with_password(client, REMOTE_ADDR="10.1.2.3").status_code == 200  # another address


@pytest.fixture
def password_checks(monkeypatch) -> list[str]:
    """The usernames whose password the registry checked (Django's authenticate())."""
    checks: list[str] = []
    real_authenticate = nacos_auth.authenticate

    def counted(request, **credentials):
        checks.append(credentials["username"])
        return real_authenticate(request, **credentials)

    monkeypatch.setattr(nacos_auth, "authenticate", counted)
    return checks


@pytest.mark.django_db
def test_a_checked_password_is_remembered_until_it_changes(client, make_user, password_checks):
    """Heartbeats every 5 s must not each pay for a password hash; a new password (or a
    deactivated user) must not be let in by what was remembered."""
    user = make_user("fleet", "service")
    for _ in range(3):
        assert with_password(client).status_code == 200
    assert password_checks == ["fleet"]
    user.set_password("another-password")
    user.save()
    assert with_password(client).content == b"unknown user!"
    assert with_password(client, "another-password").status_code == 200
    user.is_active = False
    user.save()
    assert with_password(client, "another-password").content == b"unknown user!"


@pytest.mark.django_db
def test_with_the_cache_off_every_call_is_checked(client, make_user, password_checks, settings):
    settings.EMBEDDED_REGISTRY_PASSWORD_CACHE_SECONDS = 0
    make_user("fleet", "service")
    for _ in range(3):
        assert with_password(client).status_code == 200
    assert password_checks == ["fleet"] * 3


@pytest.mark.django_db
def test_with_the_cache_unreachable_every_call_is_checked(
    client, make_user, password_checks, settings
):
    """The cache only saves work: Redis down must not refuse the fleet."""
    dead = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there
    settings.CACHES = {
        "default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": dead}
    }
    make_user("fleet", "service")
    for _ in range(2):
        assert with_password(client).status_code == 200
    assert password_checks == ["fleet"] * 2
