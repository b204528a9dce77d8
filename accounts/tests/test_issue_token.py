import io

import pytest
from django.core.management import call_command
from rest_framework.test import APIClient

from accounts.roles import role_of

pytestmark = pytest.mark.django_db


def issue(*args) -> str:
    out = io.StringIO()
    call_command("issue_token", *args, stdout=out, stderr=io.StringIO())
    return out.getvalue().strip().splitlines()[-1]


def test_issue_token_creates_the_user_and_prints_a_working_token():
    key = issue("robot", "--role", "operator")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    assert client.patch("/api/v1/policy/", {"percent": 1}, format="json").status_code == 200
    assert client.get("/api/v1/policy/").json()["updated_by"] == "robot"


def test_issue_token_changes_the_role_and_keeps_older_tokens():
    first = issue("robot", "--role", "admin")
    second = issue("robot", "--role", "viewer")
    assert first != second
    from django.contrib.auth.models import User

    assert role_of(User.objects.get(username="robot")) == "viewer"
    for key in (first, second):
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
        assert client.get("/api/v1/policy/").status_code == 200
        assert client.patch("/api/v1/policy/", {"percent": 1}, format="json").status_code == 403


def test_only_a_hash_of_the_token_is_stored():
    from accounts.models import ApiToken

    key = issue("robot", "--role", "viewer")
    stored = ApiToken.objects.get()
    assert key not in (stored.key_hash, stored.prefix) and stored.prefix == key[:8]


def test_an_unknown_role_is_refused():
    from django.core.management.base import CommandError

    with pytest.raises(CommandError):
        call_command("issue_token", "robot", "--role", "root")


def test_issue_token_gives_the_service_role_instead_of_the_others():
    from django.contrib.auth.models import User

    from accounts.roles import may_use_registry

    issue("fleet", "--role", "admin")
    issue("fleet", "--role", "service")
    user = User.objects.get(username="fleet")
    assert list(user.groups.values_list("name", flat=True)) == ["service"]
    assert role_of(user) is None and may_use_registry(user)
    issue("fleet", "--role", "viewer")
    user = User.objects.get(username="fleet")
    assert role_of(user) == "viewer" and not may_use_registry(user)


def test_service_bindings_show_in_the_admin(admin_client):
    issue("fleet", "--role", "service", "--service", "user-app", "--service", "order-app")
    page = admin_client.get("/admin/accounts/servicebinding/").content.decode()
    assert "fleet → user-app" in page and "fleet → order-app" in page
