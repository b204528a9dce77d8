"""EurekaAdapter against the FakeEureka contract fake over real loopback HTTP (no Django)."""

from __future__ import annotations

import json
import socket
import time

import httpx
import pytest

from registry_sync.adapters import (
    EurekaAdapter,
    RegistryAdapter,
    RegistryError,
    RegistryInstance,
    build_adapter,
)
from testing.fakes.eureka_fake import FakeEureka


@pytest.fixture
def eureka():
    with FakeEureka() as fake:
        yield fake


@pytest.fixture
def make_adapter():
    adapters: list[EurekaAdapter] = []

    def make(base_url: str, **kwargs) -> EurekaAdapter:
        kwargs.setdefault("timeout", 2.0)
        adapter = EurekaAdapter(base_url, **kwargs)
        adapters.append(adapter)
        return adapter

    yield make
    for adapter in adapters:
        adapter.close()


def get_requests(fake: FakeEureka) -> list[str]:
    return [path for method, path, _params in fake.requests_log if method == "GET"]


def test_lists_services_and_instances_from_one_apps_fetch(eureka, make_adapter):
    eureka.add_instance(
        "mysvc", "host1:mysvc:8080", ip="10.0.0.5", metadata={"version": "1.2.0", "weight": "3"}
    )
    eureka.add_instance("MYSVC", "host2:mysvc:8080", ip="10.0.0.6", host_name="host2.local")
    eureka.add_instance("orders", ip="10.0.0.7", port=9000)
    adapter = make_adapter(eureka.url)
    assert isinstance(adapter, RegistryAdapter)

    assert adapter.list_services() == ["mysvc", "orders"]
    found = {i.instance_id: i for i in adapter.list_instances("mysvc")}
    (order,) = adapter.list_instances("orders")

    assert found["host1:mysvc:8080"] == RegistryInstance(
        service="mysvc",
        instance_id="host1:mysvc:8080",
        host="10.0.0.5",
        port=8080,
        weight=3.0,
        healthy=True,
        enabled=True,
        metadata={"version": "1.2.0", "weight": "3"},
        cluster="DEFAULT",
        status="UP",
    )
    second = found["host2:mysvc:8080"]
    assert (second.host, second.weight, second.metadata) == ("10.0.0.6", 1.0, {})  # no @class
    assert (order.instance_id, order.port, order.service) == (
        "10.0.0.7:orders:9000",
        9000,
        "orders",
    )
    assert get_requests(eureka) == ["/eureka/apps"]  # the pass was served from one snapshot


def test_every_request_asks_for_json(eureka, make_adapter):
    eureka.add_instance("mysvc")
    adapter = make_adapter(eureka.url)
    adapter.list_services()
    (instance,) = adapter.list_instances("mysvc")
    adapter.set_enabled(instance, False)
    adapter.list_instances("mysvc")

    assert len(eureka.headers_log) == 3
    assert all(h["accept"] == "application/json" for h in eureka.headers_log)


def test_fake_answers_xml_without_a_json_accept_header(eureka):
    eureka.add_instance("mysvc")
    reply = httpx.get(f"{eureka.url}/apps", headers={"Accept": "*/*"})
    assert reply.headers["content-type"] == "application/xml"
    assert reply.text.startswith("<?xml") and "<name>MYSVC</name>" in reply.text


def test_xml_answer_is_a_registry_error(eureka, make_adapter):
    adapter = make_adapter(eureka.url)
    eureka.fail_with(200, "<applications><versions__delta>1</versions__delta></applications>")
    with pytest.raises(RegistryError, match="XML"):
        adapter.list_services()


def test_out_of_service_override_and_its_removal(eureka, make_adapter):
    eureka.add_instance("mysvc", "host1:mysvc:8080", metadata={"version": "2"})
    adapter = make_adapter(eureka.url)
    adapter.list_services()
    (instance,) = adapter.list_instances("mysvc")

    adapter.set_enabled(instance, False)

    stored = eureka.instance("MYSVC", "host1:mysvc:8080")
    assert (stored["status"], stored["overriddenStatus"]) == ("OUT_OF_SERVICE", "OUT_OF_SERVICE")
    assert eureka.requests_log[-1] == (
        "PUT",
        "/eureka/apps/MYSVC/host1:mysvc:8080/status",
        {"value": "OUT_OF_SERVICE"},
    )
    (listed,) = adapter.list_instances("mysvc")  # snapshot dropped: fetched again
    assert (listed.enabled, listed.healthy, listed.status) == (False, False, "OUT_OF_SERVICE")
    assert listed.metadata == {"version": "2"}

    adapter.set_enabled(listed, True)

    stored = eureka.instance("MYSVC", "host1:mysvc:8080")
    assert (stored["status"], stored["overriddenStatus"]) == ("UP", "UNKNOWN")
    method, path, params = eureka.requests_log[-1]
    assert (method, path) == ("DELETE", "/eureka/apps/MYSVC/host1:mysvc:8080/status")
    assert params == {"value": "UP"}  # without it Eureka would leave the instance UNKNOWN
    (listed,) = adapter.list_instances("mysvc")
    assert (listed.enabled, listed.healthy, listed.status) == (True, True, "UP")


def test_override_survives_re_registration_in_the_fake(eureka, make_adapter):
    eureka.add_instance("mysvc", "i-1")
    adapter = make_adapter(eureka.url)
    adapter.set_enabled(adapter.list_instances("mysvc")[0], False)
    eureka.add_instance("mysvc", "i-1")  # the client registers again
    assert adapter.list_instances("mysvc")[0].enabled is False


def test_unknown_instance_is_a_registry_error(eureka, make_adapter):
    eureka.add_instance("mysvc", "i-1")
    adapter = make_adapter(eureka.url)
    ghost = RegistryInstance("mysvc", "i-404", "10.9.9.9", 80, 1.0, True, True, {})

    with pytest.raises(RegistryError, match="not registered") as err:
        adapter.set_enabled(ghost, False)
    assert err.value.status == 404
    with pytest.raises(RegistryError, match="not registered"):
        adapter.set_enabled(ghost, True)


def test_unknown_app_lists_nothing(eureka, make_adapter):
    assert make_adapter(eureka.url).list_instances("nope") == []


def test_single_instance_object_quirk(make_adapter):
    with FakeEureka(single_object_quirk=True) as fake:
        fake.add_instance("mysvc", "i-1", ip="10.0.0.9")
        raw = json.loads(httpx.get(f"{fake.url}/apps", headers={"Accept": "application/json"}).text)
        assert isinstance(raw["applications"]["application"], dict)
        assert isinstance(raw["applications"]["application"]["instance"], dict)
        adapter = make_adapter(fake.url)

        assert adapter.list_services() == ["mysvc"]
        assert [i.host for i in adapter.list_instances("mysvc")] == ["10.0.0.9"]
        adapter.close()
        assert [i.host for i in make_adapter(fake.url).list_instances("mysvc")] == ["10.0.0.9"]


def test_codec_variants_lowercase_override_key_and_bare_port(eureka, make_adapter):
    adapter = make_adapter(eureka.url)
    instance = {
        "hostName": "legacy-host",
        "app": "OLD",
        "ipAddr": "10.0.0.8",
        "status": "UP",
        "overriddenstatus": "OUT_OF_SERVICE",
        "port": "8081",
    }
    eureka.fail_with(
        200, json_body={"applications": {"application": {"name": "OLD", "instance": instance}}}
    )

    assert adapter.list_services() == ["old"]
    (listed,) = adapter.list_instances("old")

    assert (listed.instance_id, listed.port) == ("legacy-host", 8081)
    assert (listed.healthy, listed.enabled) == (True, False)


def test_v2_base_url(eureka, make_adapter):
    eureka.add_instance("mysvc", "i-1")
    adapter = make_adapter(eureka.url + "/v2/")
    assert adapter.list_services() == ["mysvc"]
    adapter.set_enabled(adapter.list_instances("mysvc")[0], False)
    assert eureka.requests_log[-1][1] == "/eureka/v2/apps/MYSVC/i-1/status"
    assert eureka.instance("mysvc", "i-1")["status"] == "OUT_OF_SERVICE"


def test_snapshot_is_only_kept_for_one_pass(eureka, make_adapter):
    now = [0.0]
    eureka.add_instance("mysvc", "i-1")
    adapter = make_adapter(eureka.url, snapshot_ttl=30.0, clock=lambda: now[0])
    adapter.list_services()
    adapter.list_instances("mysvc")
    now[0] += 31

    adapter.list_instances("mysvc")

    assert get_requests(eureka) == ["/eureka/apps", "/eureka/apps/MYSVC"]


def test_basic_auth(make_adapter):
    with FakeEureka(username="eureka", password="pw") as fake:
        fake.add_instance("mysvc")
        assert make_adapter(fake.url, username="eureka", password="pw").list_services() == ["mysvc"]
        with pytest.raises(RegistryError, match="401"):
            make_adapter(fake.url).list_services()


def test_server_error_is_a_registry_error(eureka, make_adapter):
    adapter = make_adapter(eureka.url)
    eureka.fail_with(500)
    with pytest.raises(RegistryError) as err:
        adapter.list_services()
    assert "HTTP 500" in str(err.value) and f"{eureka.url}/apps" in str(err.value)


def test_timeout_is_a_registry_error(eureka, make_adapter):
    adapter = make_adapter(eureka.url, timeout=0.25)
    eureka.delay(5.0)
    started = time.monotonic()
    with pytest.raises(RegistryError, match="did not answer within 0.25s"):
        adapter.list_services()
    assert time.monotonic() - started < 10 * 0.25  # gave up long before the answer came


def test_connection_refused_is_a_registry_error(make_adapter):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(RegistryError, match="cannot connect"):
        make_adapter(f"http://127.0.0.1:{port}/eureka", timeout=1).list_services()


def test_fake_register_renew_deregister_per_contract(eureka, make_adapter):
    apps = f"{eureka.url}/apps"
    body = {
        "instance": {
            "instanceId": "10.0.0.5:mysvc:8080",
            "hostName": "10.0.0.5",
            "app": "MYSVC",
            "ipAddr": "10.0.0.5",
            "vipAddress": "mysvc",
            "status": "UP",
            "port": {"$": 8080, "@enabled": "true"},
            "dataCenterInfo": {
                "@class": "com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo",
                "name": "MyOwn",
            },
            "metadata": {"version": "1.2.0"},
        }
    }
    assert httpx.post(f"{apps}/mysvc", json=body).status_code == 204
    mismatched = httpx.post(f"{apps}/OTHER", json=body)
    assert (mismatched.status_code, mismatched.text) == (
        400,
        "Mismatched appName, expecting OTHER but was MYSVC",
    )
    no_id = {"instance": {k: v for k, v in body["instance"].items() if k != "instanceId"}}
    assert httpx.post(f"{apps}/MYSVC", json=no_id).text == "Missing instanceId"

    (listed,) = make_adapter(eureka.url).list_instances("mysvc")
    assert (listed.instance_id, listed.metadata) == ("10.0.0.5:mysvc:8080", {"version": "1.2.0"})

    assert httpx.put(f"{apps}/MYSVC/10.0.0.5:mysvc:8080").status_code == 200
    assert httpx.put(f"{apps}/MYSVC/nope").status_code == 404
    assert httpx.delete(f"{apps}/MYSVC/10.0.0.5:mysvc:8080").status_code == 200
    assert httpx.delete(f"{apps}/MYSVC/10.0.0.5:mysvc:8080").status_code == 404
    assert httpx.get(f"{apps}/MYSVC", headers={"Accept": "application/json"}).status_code == 404


def test_build_adapter_for_eureka():
    adapter = build_adapter("eureka", base_url="http://127.0.0.1:8761/eureka/")
    try:
        assert isinstance(adapter, EurekaAdapter)
        assert adapter.base_url == "http://127.0.0.1:8761/eureka"
        assert adapter.lists_disabled is True
    finally:
        adapter.close()
