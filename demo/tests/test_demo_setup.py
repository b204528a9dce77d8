"""`make run`'s demo_setup: the demo admin, and the demo fleet's `service` user whose
credentials open the embedded registry (and nothing else)."""

import io
from urllib.parse import urlencode

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command

from accounts.models import ApiToken
from accounts.roles import role_of

pytestmark = pytest.mark.django_db

INSTANCE = {"serviceName": "user-app", "ip": "10.0.0.5", "port": "7201"}


def form_post(client, path, params):
    return client.post(path, urlencode(params), content_type="application/x-www-form-urlencoded")


def test_demo_setup_makes_a_fleet_user_for_the_embedded_registry(client, settings, tmp_path):
    settings.VAR_DIR = tmp_path
    for _ in range(2):  # make run may run it again: still one demo token, the newest
        out = io.StringIO()
        call_command("demo_setup", stdout=out)
    assert "demo-fleet / graylane-fleet" in out.getvalue()
    fleet = User.objects.get(username="demo-fleet")
    assert role_of(fleet) is None
    assert list(fleet.groups.values_list("name", flat=True)) == ["service"]
    assert ApiToken.objects.filter(user=fleet).count() == 1

    token_file = tmp_path / "demo-fleet.token"
    assert token_file.stat().st_mode & 0o077 == 0
    key = token_file.read_text().strip()
    registered = form_post(client, "/nacos/v1/ns/instance", {**INSTANCE, "accessToken": key})
    assert registered.content == b"ok"
    login = form_post(
        client, "/nacos/v1/auth/login", {"username": "demo-fleet", "password": "graylane-fleet"}
    )
    assert login.status_code == 200 and login.json()["accessToken"]
    client.force_login(fleet)
    assert client.get("/").status_code == 403
