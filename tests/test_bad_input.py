"""No input makes a server error: each class of bad input gets a 400 (or 404/413) in JSON,
naming the field where there is one. Every case of the regression tests here answered
500 with Django's HTML page (or took the bad value) before; the guards at the end were
already refused and must stay so. Runs on SQLite and, in CI, PostgreSQL, which refuses
more (NUL characters) than SQLite does."""

import asyncio
import json

import pytest

from gateways import generation
from gateways.models import Gateway
from gateways.tests.conftest import asgi_scope
from graylane.asgi import application
from registry_sync.models import Service

pytestmark = pytest.mark.django_db

DEEP = "[" * 10_000 + "]" * 10_000  # RecursionError in the JSON parser itself
NESTED_PERCENT = "[" * 900 + "]" * 900  # parses; the error message about it recursed
NESTED = '{"percent": ' + NESTED_PERCENT + "}"


@pytest.fixture
def admin(api):
    Service.objects.create(name="user-app")
    return api("admin")


def send(client, method: str, path: str, body: str, **headers):
    response = getattr(client, method)(path, body, content_type="application/json", **headers)
    assert response["Content-Type"] == "application/json", response.content[:300]
    return response.status_code, response.json()


@pytest.mark.parametrize(
    "method,path,body,field",
    [
        ("patch", "/api/v1/policy/", '{"users": ["1001", "\\ud800"]}', "users[1]"),
        ("put", "/api/v1/policy/", '{"header": {"name": "g", "value": "\\udfff"}}', "header.value"),
        ("patch", "/api/v1/policy/", '{"\\ud800": 1}', "non_field_errors"),
        ("post", "/api/v1/simulate/", '{"headers": {"\\ud83d": "x"}}', "headers"),
        ("patch", "/api/v1/services/user-app/", '{"prod_version": "\\ud800"}', "prod_version"),
        ("post", "/api/v1/registries/", '{"name": "r", "kind": "embedded", "x": "\\ud800"}', "x"),
    ],
)
def test_a_lone_surrogate_is_400_naming_the_field(admin, method, path, body, field):
    status, answer = send(admin, method, path, body)
    assert status == 400 and field in answer, answer


WRITES = [
    ("put", "/api/v1/policy/"),
    ("patch", "/api/v1/policy/"),
    ("post", "/api/v1/simulate/"),
    ("post", "/api/v1/registries/"),
    ("patch", "/api/v1/services/user-app/"),
    ("post", "/api/v1/gateways/"),
]


@pytest.mark.parametrize(
    "method,path,body",
    [
        *[pytest.param(m, p, DEEP, id=f"10000-levels-{m}-{p}") for m, p in WRITES],
        *[
            pytest.param(m, p, NESTED, id=f"900-levels-{m}-{p}")
            for m, p in WRITES
            if (m, p) not in {("put", "/api/v1/policy/"), ("patch", "/api/v1/services/user-app/")}
        ],
    ],
)
def test_deeply_nested_json_is_400(admin, method, path, body):
    status, answer = send(admin, method, path, body)
    assert (status, answer) == (400, {"detail": "JSON nested more than 64 levels deep."})


@pytest.mark.parametrize(
    "method,path,body,field",
    [
        ("patch", "/api/v1/policy/", '{"users": ["a\\u0000b"]}', "users[0]"),
        ("patch", "/api/v1/policy/", '{"versions": {"prod": "V\\u0000", "gray": "V2"}}', None),
        ("patch", "/api/v1/services/user-app/", '{"gray_version": "V\\u00003"}', "gray_version"),
    ],
)
def test_a_nul_character_in_json_is_400_naming_the_field(admin, method, path, body, field):
    status, answer = send(admin, method, path, body)
    assert status == 400, answer
    assert field is None or field in answer, answer


def test_the_policy_itself_refuses_control_characters():
    # The form reaches the policy without the JSON parser; PostgreSQL cannot store a NUL.
    from routing_engine import PolicyError, merge_patch, normalize_policy
    from routing_engine.policy import DEFAULT_POLICY

    for patch, field in [
        ({"users": ["10\x0001"]}, "users"),
        ({"cities": ["Ber\nlin"]}, "cities"),
        ({"versions": {"prod": "V\x001", "gray": "V2"}}, "versions.prod"),
    ]:
        with pytest.raises(PolicyError) as caught:
            normalize_policy(merge_patch(DEFAULT_POLICY, patch))
        assert field in caught.value.errors, caught.value.errors


def test_a_service_override_refuses_control_characters():
    from policy.documents import default_document, normalize_override
    from routing_engine import PolicyError

    with pytest.raises(PolicyError) as caught:
        normalize_override(default_document(), "user-app", {"gray_version": "V\x003"})
    assert "gray_version" in caught.value.errors


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/services/%00/",
        "/api/v1/services/a%00b/instances/",
        "/nacos/v1/ns/instance/list?serviceName=a%00",
    ],
)
def test_a_nul_in_the_url_is_400_in_json(admin, path):
    response = admin.get(path)
    assert response.status_code == 400, response.content[:300]
    assert response["Content-Type"] == "application/json"


def test_a_nul_in_a_form_body_is_400_naming_the_field(admin):
    response = admin.post(
        "/nacos/v1/ns/instance",
        "serviceName=user-app&ip=10.0.0.1%00&port=8080",
        content_type="application/x-www-form-urlencoded",
    )
    assert response.status_code == 400
    assert response.json() == {"ip": ["Null characters are not allowed."]}


@pytest.mark.parametrize(
    "since",
    [
        "9999-12-31T23:59:59-23:00",  # past year 9999 in UTC
        "0001-01-01T00:00:00%2B23:00",  # before year 1 in UTC
    ],
)
def test_an_out_of_range_since_is_400_naming_it(admin, since):
    response = admin.get(f"/api/v1/audit/?since={since}")
    assert response.status_code == 400
    assert "since" in response.json()


@pytest.mark.parametrize(
    "if_match",
    ["\u00b2", "9" * 5000, '"99999999999999999999999"'],
    ids=["superscript-2", "5000-digits", "past-64-bits"],
)
def test_an_if_match_that_is_no_revision_is_400(admin, if_match):
    status, answer = send(
        admin, "patch", "/api/v1/policy/", '{"percent": 2}', HTTP_IF_MATCH=if_match
    )
    assert status == 400 and "If-Match" in answer


@pytest.mark.parametrize(
    "body,field",
    [
        ({"user": "u" * 100_000}, "user"),
        ({"headers": {"x-big": "v" * 100_000}}, "headers"),
        ({"headers": {f"x-{i}": "v" for i in range(101)}}, "headers"),
    ],
    ids=["user", "header-value", "101-headers"],
)
def test_an_oversized_simulated_request_is_400_naming_the_field(admin, body, field):
    status, answer = send(admin, "post", "/api/v1/simulate/", json.dumps(body))
    assert status == 400 and field in answer, answer


def test_an_out_of_range_registry_port_is_400(admin):
    body = {"name": "r", "kind": "nacos", "base_url": "http://10.0.0.1:99999/"}
    status, answer = send(admin, "post", "/api/v1/registries/", json.dumps(body))
    assert status == 400 and "base_url" in answer, answer


def test_an_out_of_range_gateway_port_is_400(admin):
    body = {"name": "g", "mode": "push", "endpoint": "http://10.0.0.1:70000/"}
    status, answer = send(admin, "post", "/api/v1/gateways/", json.dumps(body))
    assert status == 400 and "endpoint" in answer


def test_a_body_over_the_site_limit_is_413_before_authentication(client, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    response = client.patch(
        "/api/v1/policy/", "x" * 1001, content_type="application/json"
    )  # no credentials: 413 still comes first
    assert response.status_code == 413
    assert response.json() == {"detail": "The request body is larger than 1000 bytes."}


@pytest.mark.parametrize("path", ["/api/v1/no-such-thing/", "/nacos/v1/no-such-thing"])
def test_django_s_own_errors_are_json_under_the_api(client, path):
    response = client.get(path)
    assert response.status_code == 404
    assert response.json() == {"detail": "Not found."}


def test_a_server_error_under_the_api_is_json(rf):
    from graylane.api_errors import server_error

    response = server_error(rf.get("/api/v1/policy/"))
    assert response.status_code == 500
    assert json.loads(response.content) == {"detail": "Server error."}
    assert server_error(rf.get("/")).status_code == 500  # Django's page there


# The gateway endpoints parse their few inputs by hand, on the ASGI path as in Django.


@pytest.mark.django_db(transaction=True)  # gateway calls read in threads of their own
@pytest.mark.parametrize("known", ["%C2%B2", "9" * 5000], ids=["superscript-2", "5000-digits"])
def test_a_known_that_is_no_generation_is_400_on_both_paths(client, known):
    _, token, _ = Gateway.objects.create_with_credentials(name="edge", mode=Gateway.PULL)
    response = client.get(
        f"/api/v1/gateway-config/?known={known}", HTTP_AUTHORIZATION=f"Token {token}"
    )
    assert response.status_code == 400 and "known" in response.json()
    status, body = asgi_call(
        "GET", "/api/v1/gateway-config/", token, query=f"known={known}".encode()
    )
    assert status == 400 and "known" in json.loads(body)


@pytest.mark.django_db(transaction=True)
def test_a_deeply_nested_ack_is_400_on_the_asgi_path():
    _, token, _ = Gateway.objects.create_with_credentials(name="edge", mode=Gateway.PULL)
    generation.newest_number()
    status, answer = asgi_call("POST", "/api/v1/gateways/edge/ack/", token, body=DEEP.encode())
    assert status == 400 and "generation" in json.loads(answer), answer


def asgi_call(method: str, path: str, token: str, query: bytes = b"", body: bytes = b""):
    sent = []
    scope = asgi_scope(path, token, query, method=method)
    messages = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive():
        if messages:
            return messages.pop()
        await asyncio.Event().wait()  # the client stays

    async def send(message):
        sent.append(message)

    asyncio.run(application(scope, receive, send))
    return sent[0]["status"], sent[1]["body"]


# Guards, not regressions: bad input of the same classes that DRF's fields, Django's forms
# or the policy's own checks already refused; it must stay a 400 naming the field.


@pytest.mark.parametrize(
    "method,path,body,field",
    [
        ("post", "/api/v1/gateways/", '{"name": "g", "endpoint": "\\udc00"}', "endpoint"),
        ("put", "/api/v1/policy/", NESTED, None),  # by other fields' errors, now by depth
        ("patch", "/api/v1/services/user-app/", NESTED, None),
        ("post", "/api/v1/simulate/", '{"user": "\\u0000"}', "user"),
        ("post", "/api/v1/registries/", '{"name": "r\\u0000", "kind": "embedded"}', "name"),
        ("post", "/api/v1/gateways/", '{"name": "g", "nacos_username": "\\u0000"}', None),
        ("patch", "/api/v1/services/user-app/", json.dumps({"gray_version": "v" * 10**5}), None),
        ("patch", "/api/v1/policy/", json.dumps({"users": ["u" * 100_000]}), "users"),
        ("post", "/api/v1/registries/", json.dumps({"name": "r" * 10**5}), "name"),
        ("post", "/api/v1/gateways/", json.dumps({"name": "g", "data_id": "d" * 10**5}), None),
        ("post", "/api/v1/registries/", '{"name": "r", "sync_interval": 1e400}', None),
    ],
)
def test_bad_json_that_was_already_refused_stays_refused(admin, method, path, body, field):
    status, answer = send(admin, method, path, body)
    assert status == 400 and (field is None or field in answer), answer


@pytest.mark.parametrize(
    "query,field",
    [("actor=%00", "actor"), ("since=99999-01-01", "since"), ("since=%ED%A0%80", "since")],
)
def test_bad_query_parameters_that_were_already_refused_stay_refused(admin, query, field):
    response = admin.get(f"/api/v1/audit/?{query}")
    assert response.status_code == 400 and field in response.json()


def test_a_surrogate_pair_stays_text(admin):
    status, answer = send(admin, "patch", "/api/v1/policy/", '{"users": ["\\ud83d\\ude00"]}')
    assert status == 200 and answer["users"] == ["\U0001f600"]
