"""The embedded registry driven by the real Nacos Python client (nacos-sdk-python 2.0.11's
`nacos` package, its 1.x HTTP API) over loopback, logged in as a `service` user as against a
Nacos with auth enabled, and the sync picking up each change."""

import logging

import httpx
import nacos
import pytest

from registry_sync.models import Instance, Registry
from registry_sync.sync import sync_registry

pytestmark = pytest.mark.django_db(transaction=True)
logging.getLogger("nacos").setLevel(logging.WARNING)


@pytest.fixture
def registry():
    registry, _ = Registry.objects.get_or_create(name="embedded", kind=Registry.EMBEDDED)
    return registry


@pytest.fixture
def client(live_server, make_user):
    make_user("fleet", "service")
    return nacos.NacosClient(
        live_server.url.removeprefix("http://"),
        namespace="public",
        username="fleet",
        password="pw-for-tests",
    )


@pytest.fixture
def token(client):
    """The accessToken the client got from logging in, for calls made without it."""
    return client.token


def instance_state(host: str) -> str:
    return Instance.objects.get(host=host).state


def test_register_list_and_sync(client, registry):
    assert client.add_naming_instance(
        "user-app", "10.0.0.5", 7201, metadata={"version": "V1"}, cluster_name="DEFAULT"
    )
    assert client.add_naming_instance(
        "user-app", "10.0.0.6", 7202, metadata={"version": "V2"}, cluster_name="DEFAULT"
    )
    listed = client.list_naming_instance("user-app")
    assert listed["name"] == "DEFAULT_GROUP@@user-app"
    hosts = {h["ip"]: h for h in listed["hosts"]}
    assert hosts["10.0.0.5"]["instanceId"] == "10.0.0.5#7201#DEFAULT#DEFAULT_GROUP@@user-app"
    assert hosts["10.0.0.5"]["metadata"] == {"version": "V1"}
    assert hosts["10.0.0.5"]["instanceHeartBeatTimeOut"] == 15000
    assert "instanceIdGenerator" not in hosts["10.0.0.5"]  # metadata is not empty

    summary = sync_registry(registry)
    assert (summary.added, summary.changed, summary.gone) == (2, 0, 0)
    assert {i.version: i.state for i in Instance.objects.all()} == {"V1": "UP", "V2": "UP"}
    again = sync_registry(registry)
    assert again.rows_written == 0 and again.unchanged == 2


def test_heartbeat_keeps_an_instance_healthy_and_expiry_follows_nacos(
    client, registry, registry_clock
):
    short = {
        "version": "V1",
        "preserved.heart.beat.timeout": "1000",
        "preserved.ip.delete.timeout": "2000",
        "preserved.heart.beat.interval": "500",
    }
    client.add_naming_instance(
        "order-app", "10.0.1.1", 7301, metadata=short, cluster_name="DEFAULT"
    )
    sync_registry(registry)
    assert instance_state("10.0.1.1") == "UP"
    for _ in range(3):  # 1.2 s in all, longer than the beat timeout, each beat within it
        registry_clock.advance(0.4)
        beat = client.send_heartbeat(
            "order-app", "10.0.1.1", 7301, cluster_name="DEFAULT", metadata=short
        )
        assert beat["code"] == 10200
    sync_registry(registry)
    assert instance_state("10.0.1.1") == "UP"

    registry_clock.advance(1.2)  # past the beat timeout, not yet the delete timeout
    assert client.list_naming_instance("order-app")["hosts"][0]["healthy"] is False
    sync_registry(registry)
    assert instance_state("10.0.1.1") == "UNHEALTHY"

    registry_clock.advance(1.0)  # past the delete timeout: gone from the registry, DOWN here
    assert client.list_naming_instance("order-app")["hosts"] == []
    summary = sync_registry(registry)
    assert summary.gone == 1
    assert instance_state("10.0.1.1") == "DOWN"


def test_a_beat_for_an_unknown_instance_registers_it_or_asks_to_reregister(
    live_server, client, token, registry
):
    beat = client.send_heartbeat(
        "pay-app", "10.0.2.1", 7401, cluster_name="DEFAULT", metadata={"version": "V2"}
    )
    assert beat["code"] == 10200
    assert client.list_naming_instance("pay-app")["hosts"][0]["metadata"] == {"version": "V2"}
    bare = httpx.put(
        f"{live_server.url}/nacos/v1/ns/instance/beat",
        params={
            "serviceName": "DEFAULT_GROUP@@pay-app",
            "ip": "10.9.9.9",
            "port": 1,
            "accessToken": token,
        },
    )
    assert bare.json() == {"clientBeatInterval": 5000, "code": 20404, "lightBeatEnabled": True}


def test_deregister_then_sync_marks_down_and_keeps_the_row(client, registry):
    client.add_naming_instance(
        "user-app", "10.0.0.7", 7201, metadata={"version": "V1"}, cluster_name="DEFAULT"
    )
    sync_registry(registry)
    assert client.remove_naming_instance("user-app", "10.0.0.7", 7201, cluster_name="DEFAULT")
    assert client.list_naming_instance("user-app")["hosts"] == []
    sync_registry(registry)
    assert instance_state("10.0.0.7") == "DOWN"
    # Deregistering what is not there is still "ok", as in Nacos.
    assert client.remove_naming_instance("user-app", "10.0.0.7", 7201, cluster_name="DEFAULT")


def test_update_is_a_full_update_and_disabled_instances_leave_the_list(
    live_server, client, token, registry
):
    client.add_naming_instance(
        "user-app", "10.0.0.8", 7201, metadata={"version": "V1"}, cluster_name="DEFAULT"
    )
    response = httpx.put(
        f"{live_server.url}/nacos/v1/ns/instance",
        params={
            "serviceName": "user-app",
            "ip": "10.0.0.8",
            "port": 7201,
            "enabled": "false",
            "accessToken": token,
        },
    )
    assert response.text == "ok"
    assert client.list_naming_instance("user-app")["hosts"] == []
    sync_registry(registry)
    row = Instance.objects.get(host="10.0.0.8")
    # The full update reset metadata to {} (as Nacos' PUT does), and the instance is out.
    assert (row.state, row.enabled, row.metadata) == ("OFFLINE", False, {})


@pytest.mark.parametrize(
    "params,message",
    [
        ({"ip": "10.0.0.1", "port": 1}, "Param 'serviceName' is required."),
        ({"serviceName": "a", "port": 1}, "Param 'ip' is required."),
        ({"serviceName": "a", "ip": "1.1.1.1", "port": 1, "weight": 20000},
         "instance format invalid: The weights range from 0.0 to 10000.0"),
        ({"serviceName": "a", "ip": "1.1.1.1", "port": 1, "metadata": "nonsense"},
         "metadata format incorrect:nonsense"),
    ],
)  # fmt: skip
def test_bad_requests_get_nacos_errors(live_server, token, params, message):
    response = httpx.post(
        f"{live_server.url}/nacos/v1/ns/instance", params={**params, "accessToken": token}
    )
    assert response.status_code == 400
    assert response.text == message


def test_missing_service_lists_empty(live_server, token):
    response = httpx.get(
        f"{live_server.url}/nacos/v1/ns/instance/list",
        params={"serviceName": "nope", "accessToken": token},
    )
    assert response.status_code == 200
    assert response.json()["hosts"] == []


def test_the_server_status_counts_what_the_registry_holds_and_needs_credentials(
    client, token, live_server
):
    client.add_naming_instance("user-app", "10.0.0.5", 7201, metadata={"version": "V1"})
    client.add_naming_instance("user-app", "10.0.0.6", 7202, metadata={"version": "V2"})
    client.add_naming_instance("order-app", "10.0.1.5", 7301, metadata={"version": "V1"})
    url = live_server.url + "/nacos/v1/ns/operator/metrics"
    status = httpx.get(url, params={"accessToken": token})
    assert status.json() == {"status": "UP", "serviceCount": 2, "instanceCount": 3}
    assert httpx.get(url).status_code == 403
