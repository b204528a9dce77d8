"""Every operation of the OpenAPI document × every role: 401 without credentials, 403 with too
small a role, and neither (nor a server error) for a role that may call it.

The operations come from the document itself (GET /api/schema/?format=json), so a new
endpoint is in this matrix without anyone adding it. The least role an operation needs is
read from its view as RolePermission reads it (accounts/permissions.py): `read_role` for
safe methods (default viewer), `write_role` for the others (default operator). The
gateway endpoints (gateways/protocol/) take gateway tokens only; what the fleet reports
(MayReportLifecycle) takes a `service` user, an admin or a gateway token; what instances
report and people read (ServiceWritesPermission), a `service` user or an admin to write and
a viewer to read; the replay samples (ServiceUserOnly) a `service` user alone (bound to the
service, or 403). A new role is one
more entry in ROLES; a new kind of path parameter, one more entry in PATH_OBJECTS.
"""

import functools
import json
import re
from dataclasses import dataclass
from datetime import timedelta

import pytest
from django.test import Client
from django.urls import resolve
from django.utils import timezone
from rest_framework.test import APIClient

from accounts.permissions import RolePermission, ServiceWritesPermission
from accounts.roles import ADMIN, OPERATOR, SERVICE, VIEWER
from gateways.models import Gateway
from gateways.protocol.views import GatewayEndpoint
from policy.models import Freeze, PolicyDraft
from policy.publishing import load_state
from registry_sync.api_views import MayReportLifecycle
from registry_sync.models import Instance, Registry, Service
from releases.models import Release, ReleaseBundle, Webhook
from traffic.replay_api import ServiceUserOnly

GATEWAY_NAME = "edge"


@dataclass(frozen=True)
class Role:
    """A kind of caller: `rank` in the viewer < operator < admin chain (0: authenticated but
    in no rank: role-checked endpoints refuse it), None for no credentials."""

    rank: int | None
    group: str | None = None  # the user's group; None: no user (anonymous, a gateway)
    gateway: bool = False


ROLES = {
    "anonymous": Role(rank=None),
    VIEWER: Role(rank=1, group=VIEWER),
    OPERATOR: Role(rank=2, group=OPERATOR),
    ADMIN: Role(rank=3, group=ADMIN),
    SERVICE: Role(rank=0, group=SERVICE),  # the embedded registry only (/nacos/)
    "gateway": Role(rank=0, gateway=True),  # its own config and ack only
}
RANKS = {VIEWER: 1, OPERATOR: 2, ADMIN: 3}
SAFE_METHODS = {"get", "head", "options"}


@functools.cache
def operations() -> list[tuple[str, str]]:
    """(method, path template) of every operation of the OpenAPI document."""
    response = Client().get("/api/schema/?format=json")
    assert response.status_code == 200
    paths = json.loads(response.content)["paths"]
    methods = {"get", "put", "patch", "post", "delete"}
    return [(method, path) for path, item in paths.items() for method in item if method in methods]


# Path parameters, by the collection they name (the segment before them): the fixture
# object whose key fills them.
PATH_OBJECTS = {
    "services": lambda objects: objects["service"].name,
    "instances": lambda objects: objects["instance"].pk,
    "registries": lambda objects: objects["registry"].pk,
    "revisions": lambda objects: 1,
    "gateways": lambda objects: GATEWAY_NAME,
    "releases": lambda objects: objects["release"].pk,
    "release-bundles": lambda objects: objects["bundle"].pk,
    "lanes": lambda objects: "gray",  # always there (and never deleted: a 400)
    "quarantine": lambda objects: "V2",  # of the service above; not quarantined: a 404
    # An admin's (no owner): an operator finds no such webhook, a 404.
    "webhooks": lambda objects: objects["webhook"].pk,
    "freezes": lambda objects: objects["freeze"].pk,
    "drafts": lambda objects: objects["draft"].pk,
}


def concrete(template: str, objects: dict) -> str:
    def fill(match: re.Match) -> str:
        collection = match.group(1)
        assert collection in PATH_OBJECTS, (
            f"{template}: no fixture for a {collection} path parameter; add it to PATH_OBJECTS"
        )
        return f"{collection}/{PATH_OBJECTS[collection](objects)}"

    return re.sub(r"([\w-]+)/\{\w+\}", fill, template)


def least_role(method: str, path: str) -> str:
    """The least role the operation's view asks for, "gateway" for the gateway endpoints,
    "fleet" for what instances and gateways report, `service` for what instances report,
    "replay" for the replay samples."""
    view = resolve(path).func.cls  # type: ignore[attr-defined]
    if issubclass(view, GatewayEndpoint):
        return "gateway"
    permissions = view.permission_classes
    if MayReportLifecycle in permissions:
        return "fleet"
    if ServiceWritesPermission in permissions:
        return VIEWER if method in SAFE_METHODS else SERVICE
    if ServiceUserOnly in permissions:
        return "replay"
    assert RolePermission in permissions, (
        f"{method.upper()} {path}: {view.__name__} does not use RolePermission; "
        "teach this test its convention"
    )
    if method in SAFE_METHODS:
        return getattr(view, "read_role", VIEWER)
    return getattr(view, "write_role", OPERATOR)


def expected(role: Role, least: str) -> str:
    if role.rank is None:
        return "401"
    if least == "gateway":
        return "allowed" if role.gateway else "403"
    if least == "fleet":
        return "allowed" if role.gateway or role.group in (SERVICE, ADMIN) else "403"
    if least == SERVICE:
        return "allowed" if role.group in (SERVICE, ADMIN) else "403"
    if least == "replay":
        return "allowed" if role.group == SERVICE else "403"
    return "allowed" if role.rank >= RANKS[least] else "403"


@pytest.fixture
def objects(db):
    registry = Registry.objects.create(name="reg-1")
    service = Service.objects.create(name="user-app", registry=registry)
    instance = Instance.objects.create(
        service=service, instance_id="i-1", host="127.0.0.1", port=8080, version="V1"
    )
    load_state()  # revision 1
    _, token, _ = Gateway.objects.create_with_credentials(name=GATEWAY_NAME, mode=Gateway.PULL)
    bundle = ReleaseBundle.objects.create(name="b")
    release = Release.objects.create(
        service="user-app",
        from_version="V1",
        to_version="V2",
        steps=[{"percent": 10}],
        analysis={
            "interval_s": 60,
            "min_requests": 100,
            "max_error_rate_increase": 1.0,
            "failures_tolerated": 1,
            "max_p95_ms": None,
            "deadline_s": 3600,
        },
        bundle=bundle,
    )
    return {
        "registry": registry,
        "service": service,
        "instance": instance,
        "token": token,
        "release": release,
        "bundle": bundle,
        "webhook": Webhook.objects.create(name="hook", url="https://hooks.example.com/x"),
        "freeze": Freeze.objects.create(
            starts_at=timezone.now() + timedelta(days=1),
            ends_at=timezone.now() + timedelta(days=2),
            reason="year-end",
        ),
        # Content the live document already has: approving it makes no change.
        "draft": PolicyDraft.objects.create(
            author="someone-else",
            source="api",
            action="policy.update",
            object_label="policy",
            base_revision=1,
            content=json.dumps(load_state().document),
        ),
    }


def client_for(role_name: str, objects: dict, make_user) -> APIClient:
    from accounts.models import ApiToken

    role = ROLES[role_name]
    client = APIClient()
    if role.gateway:
        client.credentials(HTTP_AUTHORIZATION=f"Token {objects['token']}")
    elif role.group is not None:
        _, key = ApiToken.objects.issue(make_user(f"{role_name}-user", role.group))
        client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


def check(role_name: str, method: str, template: str, objects: dict, make_user) -> None:
    path = concrete(template, objects)
    client = client_for(role_name, objects, make_user)
    body = {} if method not in SAFE_METHODS else None
    response = getattr(client, method)(path, body, format="json")
    want = expected(ROLES[role_name], least_role(method, path))
    got = response.status_code
    what = f"{role_name}: {method.upper()} {path} answered {got} {response.content[:200]!r}"
    if want == "allowed":
        assert got not in (401, 403) and got < 500, what
    else:
        assert got == int(want), f"{what}, expected {want}"


def cases(gateway_endpoints: bool) -> list:
    chosen = []
    for method, template in operations():
        view = resolve(re.sub(r"\{\w+\}", "1", template)).func.cls  # type: ignore[attr-defined]
        if issubclass(view, GatewayEndpoint) == gateway_endpoints:
            chosen += [
                pytest.param(role, method, template, id=f"{role} {method.upper()} {template}")
                for role in ROLES
            ]
    return chosen


@pytest.mark.django_db
@pytest.mark.parametrize("role,method,template", cases(gateway_endpoints=False))
def test_role_checked_operations(role, method, template, objects, make_user):
    check(role, method, template, objects, make_user)


@pytest.mark.django_db(transaction=True)  # gateway calls read in threads of their own
@pytest.mark.parametrize("role,method,template", cases(gateway_endpoints=True))
def test_gateway_operations(role, method, template, objects, make_user):
    check(role, method, template, objects, make_user)


def test_the_matrix_covers_every_operation_and_both_kinds():
    ops = operations()
    assert len(ops) >= 29
    assert len(cases(False)) + len(cases(True)) == len(ops) * len(ROLES)
    assert cases(True), "the gateway endpoints are in the document"


@pytest.mark.django_db
def test_a_wrong_token_is_401():
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Token not-a-real-token")
    assert client.get("/api/v1/policy/").status_code == 401


def test_session_login_works_for_the_api_and_needs_csrf_for_writes(make_user):
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
