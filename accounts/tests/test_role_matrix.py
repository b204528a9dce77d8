"""Every endpoint × role: 401 without credentials, 403 with too small a role, 2xx otherwise."""

import pytest

from registry_sync.models import Service

pytestmark = pytest.mark.django_db

# (method, path, body, the least role that may call it)
ENDPOINTS = [
    ("get", "/api/v1/policy/", None, "viewer"),
    ("patch", "/api/v1/policy/", {"percent": 3}, "operator"),
    ("put", "/api/v1/policy/", "FULL_POLICY", "operator"),
    ("get", "/api/v1/services/", None, "viewer"),
    ("get", "/api/v1/services/user-app/", None, "viewer"),
    ("patch", "/api/v1/services/user-app/", {"gray_version": "V3"}, "operator"),
    ("get", "/api/v1/services/user-app/instances/", None, "viewer"),
    ("get", "/api/v1/revisions/", None, "viewer"),
    ("get", "/api/v1/revisions/1/", None, "viewer"),
    ("post", "/api/v1/revisions/1/rollback/", {}, "operator"),
    ("get", "/api/v1/audit/", None, "viewer"),
    ("post", "/api/v1/simulate/", {"headers": {"gray": "gray-996"}}, "viewer"),
]
RANK = {None: 0, "viewer": 1, "operator": 2, "admin": 3}


def call(client, method, path, body):
    if body == "FULL_POLICY":
        body = {key: value for key, value in client.get("/api/v1/policy/").json().items()
                if key not in ("revision", "updated_at", "updated_by")}  # fmt: skip
        body["percent"] = 4
    return (
        getattr(client, method)(path, body, format="json")
        if body is not None
        else getattr(client, method)(path)
    )


@pytest.fixture(autouse=True)
def service():
    Service.objects.create(name="user-app")


@pytest.mark.parametrize(
    "method,path,body,least", ENDPOINTS, ids=[f"{e[0]} {e[1]}" for e in ENDPOINTS]
)
def test_without_credentials_is_401(method, path, body, least):
    from rest_framework.test import APIClient

    response = getattr(APIClient(), method)(path, body or {}, format="json")
    assert response.status_code == 401


@pytest.mark.parametrize("role", [None, "viewer", "operator", "admin"])
@pytest.mark.parametrize(
    "method,path,body,least", ENDPOINTS, ids=[f"{e[0]} {e[1]}" for e in ENDPOINTS]
)
def test_each_role_gets_what_the_contract_says(api, role, method, path, body, least):
    client = api(role)
    if role in (None, "viewer") and body == "FULL_POLICY":
        body = {"percent": 4}
    response = call(client, method, path, body)
    if RANK[role] >= RANK[least]:
        assert 200 <= response.status_code < 300, (response.status_code, response.content)
    else:
        assert response.status_code == 403


def test_a_wrong_token_is_401():
    from rest_framework.test import APIClient

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Token not-a-real-token")
    assert client.get("/api/v1/policy/").status_code == 401


def test_session_login_works_for_the_api_and_needs_csrf_for_writes(make_user):
    from rest_framework.test import APIClient

    make_user("olga", "operator")
    client = APIClient(enforce_csrf_checks=True)
    assert client.login(username="olga", password="pw-for-tests")
    assert client.get("/api/v1/policy/").status_code == 200
    assert client.patch("/api/v1/policy/", {"percent": 5}, format="json").status_code == 403


@pytest.mark.parametrize(
    "path", ["/", "/policy/", "/services/", "/revisions/", "/audit/", "/simulate/"]
)
def test_dashboard_pages_need_login_and_a_role(client, make_user, path):
    response = client.get(path)
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")
    make_user("norole")
    client.login(username="norole", password="pw-for-tests")
    assert client.get(path).status_code == 403
    make_user("vera", "viewer")
    client.login(username="vera", password="pw-for-tests")
    assert client.get(path).status_code == 200
