from pathlib import Path

import pytest

from registry_sync.models import Instance, Service

pytestmark = pytest.mark.django_db

SEED = {
    "enabled": True,
    "routing": True,
    "header": {"name": "gray", "value": "gray-996"},
    "ips": ["127.0.0.1"],
    "cities": ["local"],
    "users": ["1001"],
}


@pytest.fixture
def seeded(api):
    operator = api("operator")
    assert operator.patch("/api/v1/policy/", SEED, format="json").status_code == 200
    service = Service.objects.create(name="user-app")
    for host, version, state in [("10.0.0.1", "V1", "UP"), ("10.0.0.2", "V2", "UP"),
                                 ("10.0.0.3", "V2", "OFFLINE")]:  # fmt: skip
        Instance.objects.create(
            service=service, instance_id=host, host=host, port=7201, version=version, state=state
        )
    return api("viewer")


@pytest.mark.parametrize(
    "request_body,flag,matched,version",
    [
        ({"headers": {"gray": "gray-996"}}, "GRAY", "header", "V2"),
        ({"headers": {"Gray": "gray-996"}}, "GRAY", "header", "V2"),
        ({"ip": "127.0.0.1"}, "GRAY", "ip", "V2"),
        ({"city": "local"}, "GRAY", "city", "V2"),
        ({"headers": {"X-City": "local"}}, "GRAY", "city", "V2"),
        ({"user": "1001"}, "GRAY", "user", "V2"),
        ({"headers": {"X-User-No": "1001"}}, "GRAY", "user", "V2"),
        ({"ip": "1.2.3.4", "headers": {"gray": "nope"}}, "PROD", None, "V1"),
    ],
)
def test_simulate_answers_like_the_gateway(seeded, request_body, flag, matched, version):
    response = seeded.post(
        "/api/v1/simulate/", {"service": "user-app", **request_body}, format="json"
    )
    assert response.status_code == 200, response.json()
    body = response.json()
    assert (body["flag"], body["matched"], body["version"]) == (flag, matched, version)
    assert {i["version"] for i in body["instances"]} == {version}
    assert all(i["state"] == "UP" for i in body["instances"])


def test_switch_off_is_all_and_reaches_every_routable_instance(seeded, api):
    api("operator", "op2").patch("/api/v1/policy/", {"enabled": False}, format="json")
    body = seeded.post(
        "/api/v1/simulate/", {"service": "user-app", "headers": {"gray": "gray-996"}}, format="json"
    ).json()
    assert body["flag"] == "ALL" and body["matched"] is None
    assert sorted(i["host"] for i in body["instances"]) == ["10.0.0.1", "10.0.0.2"]


def test_gray_without_a_routable_gray_instance_falls_back_to_prod(seeded):
    Instance.objects.filter(version="V2").update(state="OFFLINE")
    body = seeded.post(
        "/api/v1/simulate/", {"service": "user-app", "ip": "127.0.0.1"}, format="json"
    ).json()
    assert body["flag"] == "GRAY"
    assert body["version"] == "V1"
    assert [i["host"] for i in body["instances"]] == ["10.0.0.1"]


def test_a_bad_ip_is_a_400(seeded):
    response = seeded.post("/api/v1/simulate/", {"ip": "999.1.1.1"}, format="json")
    assert response.status_code == 400
    assert "ip" in response.json()


GEOIP_TEST_DB = Path(__file__).resolve().parents[2] / "tests/data/geoip/GeoIP2-City-Test.mmdb"


@pytest.mark.parametrize(
    "request_body,city,flag,matched",
    [
        ({"ip": "81.2.69.142"}, "London", "GRAY", "city"),
        ({"ip": "10.9.9.9"}, "local", "PROD", None),
        ({"ip": "198.51.100.7"}, None, "PROD", None),
        ({"ip": "81.2.69.142", "headers": {"X-City": "Paris"}}, "Paris", "PROD", None),
        ({"ip": "198.51.100.7", "city": "london"}, "london", "GRAY", "city"),
    ],
)
def test_the_simulator_finds_the_callers_city_as_the_gateway_does(
    api, settings, request_body, city, flag, matched
):
    """One answer everywhere to "which city is 81.2.69.142?": the gateway's resolver, with
    the same GeoIP2 database (the test database puts 81.2.69.142 in London)."""
    settings.GEOIP_DATABASE = str(GEOIP_TEST_DB)
    policy = {**SEED, "ips": [], "cities": ["London"]}
    assert api("operator").patch("/api/v1/policy/", policy, format="json").status_code == 200
    body = api("viewer").post("/api/v1/simulate/", request_body, format="json").json()
    assert (body["city"], body["flag"], body["matched"]) == (city, flag, matched)
