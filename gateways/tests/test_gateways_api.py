"""`/api/v1/gateways/`: the contract's fields, credentials shown once, statuses, acks, and
who may call what (users' roles, gateway tokens)."""

import json
from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from audit.models import AuditEntry
from gateways import generation
from gateways.models import Gateway

pytestmark = pytest.mark.django_db
# The gateway endpoints read the database from their own threads: the test's data must be
# committed for them to see it.
GATEWAY_ENDPOINT = pytest.mark.django_db(transaction=True)
CONTRACT_FIELDS = {
    "name",
    "mode",
    "endpoint",
    "status",
    "desired_generation",
    "acked_generation",
    "last_seen",
    "last_error",
}


def gateway_client(token: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    return client


def test_admin_creates_a_gateway_and_sees_its_credentials_once(api):
    admin = api("admin")
    response = admin.post(
        "/api/v1/gateways/",
        {"name": "edge-1", "mode": "push", "endpoint": "http://127.0.0.1:9/config"},
        format="json",
    )
    assert response.status_code == 201, response.content
    created = response.json()
    assert set(created) >= CONTRACT_FIELDS
    assert created["token"] and created["push_secret"]
    assert created["status"] == "pending"
    gateway = Gateway.objects.get(name="edge-1")
    assert gateway.token_hash != created["token"], "only a hash of the token is kept"
    assert created["token"].startswith(gateway.token_prefix)
    listed = admin.get("/api/v1/gateways/").json()
    assert listed["count"] == 1
    shown = listed["results"][0]
    assert set(shown) >= CONTRACT_FIELDS
    assert "token" not in shown and "push_secret" not in shown
    assert AuditEntry.objects.filter(action="gateway.create", object="gateway edge-1").exists()


def test_nacos_password_is_write_only(api):
    admin = api("admin")
    response = admin.post(
        "/api/v1/gateways/",
        {
            "name": "scg",
            "mode": "nacos",
            "endpoint": "http://127.0.0.1:8848/nacos",
            "nacos_username": "nacos",
            "nacos_password": "s3cret",
        },
        format="json",
    )
    assert response.status_code == 201, response.content
    assert "nacos_password" not in response.json()
    assert "s3cret" not in admin.get("/api/v1/gateways/scg/").content.decode()
    assert Gateway.objects.get(name="scg").nacos_password == "s3cret"
    assert response.json()["data_id"] == "gateway-app.yaml"
    assert response.json()["group"] == "DEFAULT_GROUP"


@pytest.mark.parametrize(
    "body,field",
    [
        ({"name": "a", "mode": "push"}, "endpoint"),
        ({"name": "a", "mode": "nacos", "endpoint": ""}, "endpoint"),
        ({"name": "a", "mode": "push", "endpoint": "ftp://x.example/"}, "endpoint"),
        ({"name": "not a slug", "mode": "pull"}, "name"),
        ({"name": "a", "mode": "carrier-pigeon"}, "mode"),
        ({"name": "a", "mode": "pull", "data_id": "gateway app.yaml"}, "data_id"),
        ({"name": "a", "mode": "pull", "yaml_prefix": "kerwin..tool"}, "yaml_prefix"),
    ],
)
def test_invalid_gateways_are_400_with_the_field(api, body, field):
    response = api("admin").post("/api/v1/gateways/", body, format="json")
    assert response.status_code == 400
    assert field in response.json()


def test_changing_where_a_gateway_is_delivered_to_starts_it_over(api, make_gateway):
    gateway, _, _ = make_gateway("edge", "push", "http://127.0.0.1:9/a", acked_generation=3)
    response = api("admin").patch(
        "/api/v1/gateways/edge/", {"endpoint": "http://127.0.0.1:9/b"}, format="json"
    )
    assert response.status_code == 200, response.content
    gateway.refresh_from_db()
    assert gateway.acked_generation == 0


def test_statuses(make_gateway, settings):
    current = generation.newest_number()
    now = timezone.now()
    pull, _, _ = make_gateway("pull-gw")
    push, _, _ = make_gateway("push-gw", "push", "http://127.0.0.1:9/")
    pull.last_seen = now
    assert pull.status_at(current, now) == "pending"
    pull.acked_generation = current
    assert pull.status_at(current, now) == "in_sync"
    later = now + timedelta(seconds=settings.GATEWAY_STALE_SECONDS + 1)
    assert pull.status_at(current, later) == "stale", "a pull gateway that stopped polling"
    assert push.status_at(current, later) == "pending", "push gateways are never stale"
    push.last_error = "connection refused"
    assert push.status_at(current, later) == "failing"
    push.acked_generation = current
    assert push.status_at(current, later) == "in_sync"


@GATEWAY_ENDPOINT
def test_a_gateway_acks_for_itself_and_acks_never_go_backwards(make_gateway):
    gateway, token, _ = make_gateway("edge")
    current = generation.bump("test")
    client = gateway_client(token)
    response = client.post("/api/v1/gateways/edge/ack/", {"generation": current}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["status"] == "in_sync"
    assert response.json()["acked_generation"] == current
    older = client.post("/api/v1/gateways/edge/ack/", {"generation": current - 1}, format="json")
    assert older.status_code == 200
    gateway.refresh_from_db()
    assert gateway.acked_generation == current
    assert gateway.last_seen is not None
    future = client.post("/api/v1/gateways/edge/ack/", {"generation": current + 1}, format="json")
    assert future.status_code == 400
    assert "generation" in future.json()
    for body in ({}, {"generation": -1}, {"generation": "x"}):
        assert client.post("/api/v1/gateways/edge/ack/", body, format="json").status_code == 400


@GATEWAY_ENDPOINT
def test_an_error_ack_records_the_refusal_and_keeps_the_acked_generation(make_gateway):
    gateway, token, _ = make_gateway("edge")
    client = gateway_client(token)
    good = generation.bump("good")
    acked = client.post("/api/v1/gateways/edge/ack/", {"generation": good}, format="json")
    assert acked.status_code == 200
    bad = generation.bump("bad")
    response = client.post(
        "/api/v1/gateways/edge/ack/",
        {"generation": bad, "error": "services.user-app.prod: no version"},
        format="json",
    )
    assert response.status_code == 200, response.content
    assert response.json() == {"name": "edge", "acked_generation": good, "status": "failing"}
    gateway.refresh_from_db()
    assert gateway.acked_generation == good
    assert "services.user-app.prod: no version" in gateway.last_error
    for error in ("", 7, "x" * 2001):
        refused = client.post(
            "/api/v1/gateways/edge/ack/", {"generation": bad, "error": error}, format="json"
        )
        assert refused.status_code == 400 and "error" in refused.json()
    gateway.refresh_from_db()
    assert gateway.acked_generation == good, "a refused ack records nothing"
    # The next good generation clears the error.
    newer = generation.bump("fixed")
    client.post("/api/v1/gateways/edge/ack/", {"generation": newer}, format="json")
    gateway.refresh_from_db()
    assert (gateway.acked_generation, gateway.last_error) == (newer, "")


@GATEWAY_ENDPOINT
def test_a_poll_answer_names_the_gateway_that_asked(make_gateway):
    _, token, _ = make_gateway("edge-7")
    response = gateway_client(token).get("/api/v1/gateway-config/")
    assert response.status_code == 200
    assert response["X-Graylane-Gateway"] == "edge-7"
    known = response.json()["generation"]
    waited = gateway_client(token).get("/api/v1/gateway-config/", {"known": known, "wait": 0})
    assert waited.status_code == 304
    assert waited["X-Graylane-Gateway"] == "edge-7"


@GATEWAY_ENDPOINT
def test_a_gateway_acking_an_old_generation_stays_pending(make_gateway):
    _, token, _ = make_gateway("edge")
    old = generation.bump("one")
    generation.bump("two")
    response = gateway_client(token).post(
        "/api/v1/gateways/edge/ack/", {"generation": old}, format="json"
    )
    assert response.status_code == 200
    assert response.json()["status"] == "pending"


# Role matrix of the gateway endpoints: (method, path, body, who may call it).
ENDPOINTS = [
    ("get", "/api/v1/gateways/", None, "viewer"),
    ("get", "/api/v1/gateways/edge/", None, "viewer"),
    ("post", "/api/v1/gateways/", {"name": "new", "mode": "pull"}, "admin"),
    ("patch", "/api/v1/gateways/edge/", {"endpoint": "http://127.0.0.1:9/x"}, "admin"),
    ("delete", "/api/v1/gateways/edge/", None, "admin"),
    ("post", "/api/v1/gateways/edge/ack/", {"generation": 1}, "gateway"),
    ("get", "/api/v1/gateway-config/", None, "gateway"),
]
RANK = {None: 0, "viewer": 1, "operator": 2, "admin": 3}
IDS = [f"{method} {path}" for method, path, _, _ in ENDPOINTS]


@pytest.fixture
def edge(make_gateway):
    gateway, token, _ = make_gateway("edge")
    generation.newest_number()
    return token


def call(client, method, path, body):
    if body is None:
        return getattr(client, method)(path)
    return getattr(client, method)(path, body, format="json")


@GATEWAY_ENDPOINT
@pytest.mark.parametrize("method,path,body,least", ENDPOINTS, ids=IDS)
def test_without_credentials_is_401(edge, method, path, body, least):
    assert call(APIClient(), method, path, body).status_code == 401


@GATEWAY_ENDPOINT
@pytest.mark.parametrize("role", [None, "viewer", "operator", "admin"])
@pytest.mark.parametrize("method,path,body,least", ENDPOINTS, ids=IDS)
def test_users_get_what_their_role_allows(api, edge, role, method, path, body, least):
    response = call(api(role), method, path, body)
    if least != "gateway" and RANK[role] >= RANK[least]:
        assert 200 <= response.status_code < 300, (response.status_code, response.content)
    else:
        assert response.status_code == 403, (response.status_code, response.content)


@GATEWAY_ENDPOINT
@pytest.mark.parametrize("method,path,body,least", ENDPOINTS, ids=IDS)
def test_a_gateway_token_does_gateway_things_only(edge, method, path, body, least):
    response = call(gateway_client(edge), method, path, body)
    if least == "gateway":
        assert 200 <= response.status_code < 300, (response.status_code, response.content)
    else:
        assert response.status_code == 403, (response.status_code, response.content)


@pytest.mark.parametrize(
    "method,path,body",
    [
        ("get", "/api/v1/policy/", None),
        ("patch", "/api/v1/policy/", {"percent": 5}),
        ("get", "/api/v1/services/", None),
        ("get", "/api/v1/revisions/", None),
        ("get", "/api/v1/audit/", None),
        ("post", "/api/v1/simulate/", {"headers": {}}),
    ],
)
def test_a_gateway_token_is_403_everywhere_else(edge, method, path, body):
    assert call(gateway_client(edge), method, path, body).status_code == 403


@GATEWAY_ENDPOINT
def test_a_gateway_acks_only_for_itself(make_gateway):
    make_gateway("edge")
    _, other_token, _ = make_gateway("other")
    generation.newest_number()
    client = gateway_client(other_token)
    assert client.post("/api/v1/gateways/edge/ack/", {"generation": 1}).status_code == 403
    assert client.post("/api/v1/gateways/nobody/ack/", {"generation": 1}).status_code == 403


def test_the_openapi_document_describes_the_gateway_endpoints():
    schema = APIClient().get("/api/schema/", {"format": "json"}).json()
    config = schema["paths"]["/api/v1/gateway-config/"]["get"]
    assert {p["name"] for p in config["parameters"]} == {"known", "wait", "applied"}
    assert {"200", "304", "400", "401", "403"} <= config["responses"].keys()
    ack = schema["paths"]["/api/v1/gateways/{name}/ack/"]["post"]
    body = resolve(schema, ack["requestBody"]["content"]["application/json"]["schema"])
    assert body["required"] == ["generation"]
    answer = resolve(schema, ack["responses"]["200"]["content"]["application/json"]["schema"])
    assert set(answer["properties"]) == {"name", "acked_generation", "status"}
    assert ack["security"] == config["security"] == [{"tokenAuth": []}]


def resolve(schema: dict, node: dict) -> dict:
    """A schema object, following its `$ref` into the components."""
    if "$ref" not in node:
        return node
    return schema["components"]["schemas"][node["$ref"].rsplit("/", 1)[1]]


@GATEWAY_ENDPOINT
def test_an_ack_with_skipped_records_is_in_sync_and_shows_them_until_the_next_ack(make_gateway):
    gateway, token, _ = make_gateway("edge")
    client = gateway_client(token)
    first = generation.bump("one")
    skipped = [
        {
            "record": "services.user-app.instances[10.0.0.5#7201#DEFAULT#user-app]",
            "reason": "port: 0 is not a port",
        },
        {"record": "services.order-app", "reason": "prod: '' is empty; not routed"},
    ]
    response = client.post(
        "/api/v1/gateways/edge/ack/", {"generation": first, "skipped": skipped}, format="json"
    )
    assert response.status_code == 200, response.content
    assert response.json() == {"name": "edge", "acked_generation": first, "status": "in_sync"}
    row = next(
        r for r in admin_client().get("/api/v1/gateways/").json()["results"] if r["name"] == "edge"
    )
    assert (row["status"], row["skipped"], row["last_error"]) == ("in_sync", skipped, "")
    # A repeated or older ack changes nothing; the next generation's ack replaces the list.
    client.post("/api/v1/gateways/edge/ack/", {"generation": first}, format="json")
    gateway.refresh_from_db()
    assert gateway.skipped == skipped
    second = generation.bump("two")
    client.post("/api/v1/gateways/edge/ack/", {"generation": second}, format="json")
    gateway.refresh_from_db()
    assert (gateway.acked_generation, gateway.skipped) == (second, [])


@GATEWAY_ENDPOINT
@pytest.mark.parametrize(
    "skipped",
    [
        "port: 0",
        [{"record": "services.a"}],
        [{"record": "services.a", "reason": ""}],
        [{"record": "services.a", "reason": "x", "extra": 1}],
        [{"record": "x" * 601, "reason": "x"}],
        [{"record": "services.a", "reason": "x" * 401}],
        [{"record": "services.a\x00", "reason": "x"}],
        [{"record": "services.a", "reason": "\ud800"}],
        [{"record": f"services.s{n}", "reason": "x"} for n in range(51)],
    ],
)
def test_malformed_skipped_records_are_400_and_record_nothing(make_gateway, skipped):
    gateway, token, _ = make_gateway("edge")
    number = generation.bump("one")
    body = json.dumps({"generation": number, "skipped": skipped})  # a lone surrogate escaped
    response = gateway_client(token).post(
        "/api/v1/gateways/edge/ack/", body, content_type="application/json"
    )
    assert response.status_code == 400
    assert "skipped" in response.json()
    gateway.refresh_from_db()
    assert (gateway.acked_generation, gateway.skipped) == (0, [])


@GATEWAY_ENDPOINT
def test_skipped_records_of_someone_else_are_403_before_400(make_gateway):
    make_gateway("edge")
    _, other, _ = make_gateway("other")
    number = generation.bump("one")
    response = gateway_client(other).post(
        "/api/v1/gateways/edge/ack/", {"generation": number, "skipped": "bad"}, format="json"
    )
    assert response.status_code == 403


def admin_client() -> APIClient:
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group

    from accounts.models import ApiToken

    user = get_user_model().objects.create_user(username="ada")
    user.groups.add(Group.objects.get_or_create(name="admin")[0])
    return gateway_client(ApiToken.objects.issue(user)[1])


@pytest.mark.parametrize("mode", ["push", "nacos"])
def test_a_gateway_endpoint_at_a_metadata_address_is_refused(api, mode):
    response = api("admin").post(
        "/api/v1/gateways/",
        {"name": "meta", "mode": mode, "endpoint": "http://169.254.169.254/latest/"},
        format="json",
    )
    assert response.status_code == 400
    assert response.json()["endpoint"] == [
        "169.254.169.254 is a cloud metadata address: refused (OUTBOUND_DENIED_NETWORKS)"
    ]
    assert not Gateway.objects.filter(name="meta").exists()


@GATEWAY_ENDPOINT
def test_gateways_made_in_bulk_each_poll_with_their_own_token():
    made = Gateway.objects.bulk_create_with_credentials(["fleet-0", "fleet-1", "fleet-2"])
    assert [name for name, _ in made] == ["fleet-0", "fleet-1", "fleet-2"]
    assert len({token for _, token in made}) == 3
    for name, token in made:
        response = gateway_client(token).get("/api/v1/gateway-config/")
        assert response.status_code == 200
        assert response["X-Graylane-Gateway"] == name
    assert set(Gateway.objects.values_list("mode", flat=True)) == {Gateway.PULL}


def row_of(admin: APIClient, name: str) -> dict:
    rows = admin.get("/api/v1/gateways/").json()["results"]
    return next(r for r in rows if r["name"] == name)


ACKED_FIELDS = ("status", "acked_generation", "desired_generation", "last_error", "skipped")


@GATEWAY_ENDPOINT
def test_an_ack_folded_into_the_poll_is_recorded_as_the_ack_endpoint_records_it(
    make_gateway, monkeypatch
):
    """`applied=N` on the long poll is the ack `{"generation": N}`: the same row, the same
    live update; the poll is answered as without it."""
    from gateways import status_updates

    changed: list[int] = []
    monkeypatch.setattr(status_updates, "changed", lambda *pks: changed.extend(pks))
    folding, folding_token, _ = make_gateway("edge-poll")
    posting, posting_token, _ = make_gateway("edge-post")
    skipped = [{"record": "services.a", "reason": "bad"}]
    first = generation.bump("one")
    for name, token in (("edge-poll", folding_token), ("edge-post", posting_token)):
        gateway_client(token).post(
            f"/api/v1/gateways/{name}/ack/",
            {"generation": first, "skipped": skipped},
            format="json",
        )
    second = generation.bump("two")
    changed.clear()
    polled = gateway_client(folding_token).get(
        "/api/v1/gateway-config/", {"known": second, "wait": 0, "applied": second}
    )
    assert polled.status_code == 304
    assert polled["X-Graylane-Gateway"] == "edge-poll"
    assert changed == [folding.pk], "the gateways page hears of it"
    posted = gateway_client(posting_token).post(
        "/api/v1/gateways/edge-post/ack/", {"generation": second}, format="json"
    )
    assert posted.status_code == 200
    admin = admin_client()
    by_poll, by_post = row_of(admin, "edge-poll"), row_of(admin, "edge-post")
    assert [by_poll[f] for f in ACKED_FIELDS] == [by_post[f] for f in ACKED_FIELDS]
    assert (by_poll["status"], by_poll["acked_generation"], by_poll["skipped"]) == (
        "in_sync",
        second,
        [],
    )
    folding.refresh_from_db()
    posting.refresh_from_db()
    assert folding.acked_at is not None and folding.acked_at <= posting.acked_at
    assert folding.last_seen is not None


@GATEWAY_ENDPOINT
def test_an_ack_folded_into_the_poll_never_moves_back_nor_clears_an_error(make_gateway):
    """As posted acks: an error ack keeps using the ack endpoint, and the poll's `applied`
    of the generation still run (below the refused one) leaves the error in place."""
    gateway, token, _ = make_gateway("edge")
    client = gateway_client(token)
    good = generation.bump("good")
    assert client.get("/api/v1/gateway-config/", {"applied": good}).status_code == 200
    bad = generation.bump("bad")
    refused = client.post(
        "/api/v1/gateways/edge/ack/", {"generation": bad, "error": "gray: no"}, format="json"
    )
    assert refused.json() == {"name": "edge", "acked_generation": good, "status": "failing"}
    polled = client.get("/api/v1/gateway-config/", {"known": bad, "wait": 0, "applied": good})
    assert polled.status_code == 304
    admin = admin_client()
    row = row_of(admin, "edge")
    assert (row["status"], row["acked_generation"]) == ("failing", good)
    assert "gray: no" in row["last_error"]
    client.get("/api/v1/gateway-config/", {"known": bad, "wait": 0, "applied": good - 1})
    gateway.refresh_from_db()
    assert gateway.acked_generation == good, "acks never move backwards"
    fixed = generation.bump("fixed")
    client.get("/api/v1/gateway-config/", {"known": fixed, "wait": 0, "applied": fixed})
    row = row_of(admin, "edge")
    assert (row["status"], row["acked_generation"], row["last_error"]) == ("in_sync", fixed, "")


@GATEWAY_ENDPOINT
def test_a_poll_applying_what_does_not_exist_is_answered_and_records_nothing(make_gateway):
    gateway, token, _ = make_gateway("edge")
    current = generation.bump("one")
    client = gateway_client(token)
    # A generation the database does not have (it went back in time): the poll is
    # answered all the same, with the document, and nothing is acked.
    ahead = client.get("/api/v1/gateway-config/", {"known": current + 3, "applied": current + 3})
    assert ahead.status_code == 200 and ahead.json()["generation"] == current
    gateway.refresh_from_db()
    assert (gateway.acked_generation, gateway.last_seen is not None) == (0, True)
    for applied in ("x", "-1", "1" * 20):
        bad = client.get("/api/v1/gateway-config/", {"known": current, "applied": applied})
        assert bad.status_code == 400 and "applied" in bad.json()
    assert (
        gateway_client("not-a-token").get("/api/v1/gateway-config/", {"applied": "x"}).status_code
        == 401
    ), "credentials before parameters"
    gateway.refresh_from_db()
    assert gateway.acked_generation == 0
