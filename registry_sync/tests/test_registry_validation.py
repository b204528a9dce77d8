"""The one check of registry data (registry_sync/adapters/validation.py): what it refuses,
the embedded registry refusing the same at registration (Nacos-style 400), and where
operators see what a sync skipped."""

import math
from urllib.parse import urlencode

import pytest

from accounts.models import ApiToken
from embedded_registry.models import EmbeddedInstance
from registry_sync.adapters import RegistryInstance, SkippedInstance, validation
from registry_sync.models import Registry

GOOD = RegistryInstance(
    service="user-app",
    instance_id="10.0.0.1#7201#DEFAULT#DEFAULT_GROUP@@user-app",
    host="10.0.0.1",
    port=7201,
    weight=1.0,
    healthy=True,
    enabled=True,
    metadata={"version": "V1"},
)


def with_(**changes) -> RegistryInstance:
    fields = {name: getattr(GOOD, name) for name in GOOD.__dataclass_fields__}
    return RegistryInstance(**{**fields, **changes})


@pytest.mark.parametrize(
    "instance",
    [
        GOOD,
        with_(host="fe80::1"),
        with_(host="user-app-7f9c.default.svc.cluster.local"),
        with_(service="Order_App.v2:grpc@team-a", port=1, weight=0.0),
        with_(port=65535, weight=10000),
        with_(instance_id="user-app:10.0.0.1:7201", cluster="eu-west_1"),
        with_(metadata={f"k{n}": "v" * 200 for n in range(64)}),
    ],
)
def test_good_instances_pass(instance):
    validation.check_instance(instance)


@pytest.mark.parametrize(
    "changes,field",
    [
        ({"service": "a/b"}, "service"),
        ({"service": "-leading-dash"}, "service"),
        ({"service": "group@@service"}, "service"),
        ({"service": "user-app\n"}, "service"),
        ({"service": "x" * 256}, "service"),
        ({"service": "名前"}, "service"),
        ({"instance_id": "a/b"}, "instance_id"),
        ({"instance_id": "x" * 256}, "instance_id"),
        ({"instance_id": ""}, "instance_id"),
        ({"host": ""}, "host"),
        ({"host": "999.1.1.1"}, "host"),
        ({"host": "not a host"}, "host"),
        ({"host": "a" * 64 + ".example"}, "host"),
        ({"host": "10.0.0.1\x00"}, "host"),
        ({"host": "fe80::1%" + "e" * 250}, "host"),
        ({"host": "1.2.3"}, "host"),
        ({"host": None}, "host"),
        ({"port": 0}, "port"),
        ({"port": 65536}, "port"),
        ({"port": True}, "port"),
        ({"port": "7201"}, "port"),
        ({"weight": math.nan}, "weight"),
        ({"weight": math.inf}, "weight"),
        ({"weight": -1.0}, "weight"),
        ({"weight": 10000.5}, "weight"),
        ({"cluster": "a/b"}, "cluster"),
        ({"metadata": {f"k{n}": "v" for n in range(65)}}, "metadata"),
        ({"metadata": {"k": "v" * (16 * 1024)}}, "metadata"),
        ({"metadata": {"k": "\ud800"}}, "metadata"),
        ({"metadata": {"k": 1}}, "metadata"),
        ({"metadata": {"k\x00": "v"}}, "metadata"),
        ({"metadata": ["version"]}, "metadata"),
    ],
)
def test_bad_instances_are_refused_with_the_field_and_why(changes, field):
    with pytest.raises(validation.InvalidInstance) as error:
        validation.check_instance(with_(**changes))
    assert error.value.field == field
    assert "\x00" not in error.value.reason  # shown escaped, never stored raw


def test_the_releases_service_name_rule_is_the_same_one():
    from policy import documents

    assert documents.SERVICE_NAME is validation.SERVICE_NAME
    assert not documents.SERVICE_NAME.match("user-app\n")  # "$" would have let it through


def test_screen_skips_duplicates_and_keeps_what_adapters_could_not_read():
    unreadable = SkippedInstance("user-app", None, "field 'ip' is missing")
    screened = validation.screen(
        "user-app", [GOOD, with_(port=0, instance_id="b"), GOOD, unreadable]
    )
    assert screened.instances == [GOOD]
    twice = f"instance id {GOOD.instance_id!r} listed twice; the first one is synced"
    assert [(s.instance_id, s.reason) for s in screened.skipped] == [
        ("b", "port 0 is not between 1 and 65535"),
        (GOOD.instance_id, twice),
        (None, "field 'ip' is missing"),
    ]


def test_the_report_names_what_fits_and_counts_the_rest():
    skipped = [SkippedInstance("user-app", f"id-{n}", "port 0 is not between 1 and 65535")
               for n in range(200)]  # fmt: skip
    text = validation.report(skipped)
    assert len(text) <= 2000
    assert text.startswith("Skipped 200 invalid instances (the others synced): 'user-app' 'id-0'")
    assert text.endswith(" more")
    assert validation.report([]) == ""


# -- the embedded registry refuses the same at registration -----------------------------------


@pytest.fixture
def access_token(make_user):
    _, key = ApiToken.objects.issue(make_user("fleet", "service"))
    return key


GOOD_PARAMS = {"serviceName": "user-app", "ip": "10.0.0.1", "port": "7201"}


@pytest.mark.django_db
@pytest.mark.parametrize(
    "changes,message",
    [
        ({"serviceName": "a/b"}, "Param 'serviceName' is illegal: service name 'a/b' is not"),
        ({"serviceName": "DEFAULT_GROUP@@a b"}, "Param 'serviceName' is illegal"),
        ({"ip": "not a host"}, "Param 'ip' is illegal: host 'not a host' is not"),
        ({"ip": "a" * 65}, "Param 'ip' is illegal"),
        ({"port": "0"}, "Param 'port' is illegal: port 0 is not between 1 and 65535"),
        ({"port": "70000"}, "Param 'port' is illegal: port 70000"),
        ({"clusterName": "a/b"}, "Param 'clusterName' is illegal"),
        ({"groupName": "g/x"}, "Param 'groupName' is illegal"),
        ({"namespaceId": "n" * 129}, "Param 'namespaceId' is illegal"),
        ({"metadata": '{"version": "V1\\u0000"}'}, "Param 'metadata' is illegal"),
        ({"metadata": '{"k": "' + "v" * 17000 + '"}'}, "Param 'metadata' is illegal: metadata is"),
    ],
)
def test_register_refuses_what_the_sync_would_skip(client, access_token, changes, message):
    query = urlencode({**GOOD_PARAMS, **changes, "accessToken": access_token})
    for method in (client.post, client.put):  # register, and the full update
        response = method(f"/nacos/v1/ns/instance?{query}")
        assert response.status_code == 400, response.content
        assert response.content.decode().startswith(message)
    assert not EmbeddedInstance.objects.exists()


@pytest.mark.django_db
def test_a_beat_that_would_register_a_bad_instance_is_refused(client, access_token):
    for beat, message in [
        ('{"ip": "not a host", "port": 7201, "weight": 1}', "Param 'ip' is illegal"),
        ('{"ip": "10.0.0.1", "port": 7201, "weight": "NaN"}', "instance format invalid"),
        ('{"ip": "10.0.0.1", "port": 7201, "metadata": [1]}', "Param 'beat' is illegal"),
        ('["not", "an object"]', "Param 'beat' is illegal"),
    ]:
        query = urlencode({"serviceName": "user-app", "accessToken": access_token, "beat": beat})
        response = client.put(f"/nacos/v1/ns/instance/beat?{query}")
        assert response.status_code == 400, response.content
        assert response.content.decode().startswith(message)
    assert not EmbeddedInstance.objects.exists()


@pytest.mark.django_db
def test_a_good_registration_still_works(client, access_token):
    query = urlencode({**GOOD_PARAMS, "accessToken": access_token})
    response = client.post(f"/nacos/v1/ns/instance?{query}")
    assert (response.status_code, response.content) == (200, b"ok")
    assert EmbeddedInstance.objects.get().ip == "10.0.0.1"


# -- where operators see it -------------------------------------------------------------------


@pytest.mark.django_db
def test_skipped_instances_show_on_the_overview_and_in_the_api(client, make_user, api):
    Registry.objects.create(
        name="nacos-prod",
        kind="nacos",
        base_url="http://127.0.0.1:8848/nacos",
        skipped_instances=2,
        last_error="Skipped 2 invalid instances (the others synced): 'user-app' 'x': port 0 …",
    )
    make_user("vera", "viewer")
    client.login(username="vera", password="pw-for-tests")
    page = client.get("/").content.decode()
    assert "2 skipped" in page and "&#x27;user-app&#x27; &#x27;x&#x27;: port 0" in page
    body = api("viewer").get("/api/v1/registries/").json()
    row = next(r for r in body["results"] if r["name"] == "nacos-prod")
    assert (row["stale"], row["skipped_instances"]) == (False, 2)
    assert row["last_error"].startswith("Skipped 2 invalid instances")
