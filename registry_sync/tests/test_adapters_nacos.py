"""NacosAdapter against the FakeNacos contract fake over real loopback HTTP (no Django)."""

from __future__ import annotations

import json
import socket
import time

import httpx
import pytest

from registry_sync.adapters import (
    NacosAdapter,
    RegistryAdapter,
    RegistryError,
    RegistryInstance,
    build_adapter,
)
from testing.fakes.nacos_fake import FakeNacos

VERSIONS = ["1.x", "2.x", "3.x"]
USER, PASSWORD = "nacos", "s3cret"


@pytest.fixture(params=VERSIONS)
def version(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def make_adapter():
    adapters: list[NacosAdapter] = []

    def make(fake: FakeNacos, **kwargs) -> NacosAdapter:
        kwargs.setdefault("timeout", 2.0)
        adapter = NacosAdapter(fake.url, **kwargs)
        adapters.append(adapter)
        return adapter

    yield make
    for adapter in adapters:
        adapter.close()


def expected_api(version: str) -> str:
    return "v3" if version == "3.x" else "v1"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def logins(fake: FakeNacos) -> int:
    return sum(1 for _m, path, _p in fake.requests_log if path.endswith("/login"))


# -- services -------------------------------------------------------------------------------


def test_list_services_pages_through_everything(version, make_adapter):
    with FakeNacos(version=version, page_limit=3) as fake:
        names = [f"svc-{i:02d}" for i in range(8)]
        for i, name in enumerate(names):
            fake.add_instance(name, f"10.0.0.{i}", 8080)
        fake.add_instance("other-group-svc", "10.0.1.1", 8080, group="OTHER")
        fake.add_instance("dev-svc", "10.0.1.2", 8080, namespace="dev")
        # v3 groupNameParam is a contains-match: this group must still be filtered out
        fake.add_instance("lookalike", "10.0.1.3", 8080, group="DEFAULT_GROUP_CANARY")
        adapter = make_adapter(fake, page_size=4)  # the server caps pages to 3 anyway

        assert adapter.list_services() == names

        path = "/v3/admin/ns/service/list" if version == "3.x" else "/v1/ns/service/list"
        pages = [p for p in fake.requests_to(path) if p.get("pageSize") != "1"]  # not the probe
        assert [p["pageNo"] for p in pages] == ["1", "2", "3"]
        assert all(p["namespaceId"] == "public" for p in pages)
        group_key = "groupNameParam" if version == "3.x" else "groupName"
        assert all(p[group_key] == "DEFAULT_GROUP" for p in pages)


def test_list_services_uses_namespace_group_and_default_page_size(version, make_adapter):
    with FakeNacos(version=version) as fake:
        fake.add_instance("a", "10.0.0.1", 80, namespace="dev", group="PAY")
        fake.add_instance("b", "10.0.0.2", 80)
        adapter = make_adapter(fake, namespace="dev", group="PAY")

        assert adapter.list_services() == ["a"]

        path = "/v3/admin/ns/service/list" if version == "3.x" else "/v1/ns/service/list"
        (page,) = [p for p in fake.requests_to(path) if p.get("pageSize") != "1"]
        assert page["pageSize"] == ("500" if version == "3.x" else "1000")
        assert page["namespaceId"] == "dev"


# -- instances ------------------------------------------------------------------------------


def test_list_instances_maps_fields(version, make_adapter):
    with FakeNacos(version=version) as fake:
        fake.add_instance("orders", "10.0.0.1", 8080, metadata={"version": "1.2.0"}, weight=2.5)
        fake.add_instance("orders", "10.0.0.2", 8080, healthy=False)
        fake.add_instance("orders", "10.0.0.3", 9090, cluster="canary", metadata={"zone": "b"})
        adapter = make_adapter(fake)
        assert isinstance(adapter, RegistryAdapter)
        assert adapter.lists_disabled is False and fake.requests_log == []  # no I/O, no probe

        found = {i.host: i for i in adapter.list_instances("orders")}

        assert set(found) == {"10.0.0.1", "10.0.0.2", "10.0.0.3"}
        first = found["10.0.0.1"]
        assert first == RegistryInstance(
            service="orders",
            instance_id="10.0.0.1#8080#DEFAULT#DEFAULT_GROUP@@orders",
            host="10.0.0.1",
            port=8080,
            weight=2.5,
            healthy=True,
            enabled=True,
            metadata={"version": "1.2.0"},
            cluster="DEFAULT",
            status="UP",
        )
        assert (found["10.0.0.2"].healthy, found["10.0.0.2"].status) == (False, "DOWN")
        assert found["10.0.0.3"].cluster == "canary"
        assert found["10.0.0.3"].metadata == {"zone": "b"}
        # a grouped name is accepted too
        assert sorted(i.host for i in adapter.list_instances("DEFAULT_GROUP@@orders")) == sorted(
            found
        )
        with pytest.raises(ValueError):
            adapter.list_instances("OTHER@@orders")


def test_missing_service_lists_nothing(version, make_adapter):
    with FakeNacos(version=version) as fake:
        fake.add_instance("present", "10.0.0.1", 80)
        assert make_adapter(fake).list_instances("absent") == []


def test_instance_id_is_built_when_the_server_omits_it(make_adapter):
    with FakeNacos(version="1.x") as fake:
        adapter = make_adapter(fake, api_version="v1")
        host = {"ip": "10.1.1.1", "port": 80, "valid": True, "metadata": {"version": "3"}}
        fake.fail_with(200, json_body={"name": "DEFAULT_GROUP@@svc", "hosts": [host]})

        (instance,) = adapter.list_instances("svc")

        assert instance.instance_id == "10.1.1.1#80#DEFAULT#DEFAULT_GROUP@@svc"
        assert (instance.healthy, instance.enabled, instance.weight) == (True, True, 1.0)
        assert instance.metadata == {"version": "3"}


def test_disabled_instances_hidden_by_v1_listed_by_v3(version, make_adapter):
    with FakeNacos(version=version) as fake:
        fake.add_instance("pay", "10.0.0.1", 80)
        fake.add_instance("pay", "10.0.0.2", 80, enabled=False)
        adapter = make_adapter(fake)

        listed = {i.host: i.enabled for i in adapter.list_instances("pay")}

        if version == "3.x":
            assert adapter.lists_disabled is True
            assert listed == {"10.0.0.1": True, "10.0.0.2": False}
        else:
            assert adapter.lists_disabled is False
            assert listed == {"10.0.0.1": True}


def test_auto_probes_once(version, make_adapter):
    with FakeNacos(version=version) as fake:
        fake.add_instance("pay", "10.0.0.1", 80)
        adapter = make_adapter(fake)
        adapter.list_services()
        adapter.list_instances("pay")
        adapter.list_services()

        assert adapter.api_version == expected_api(version)
        probes = [
            p for p in fake.requests_to("/v3/admin/ns/service/list") if p.get("pageSize") == "1"
        ]
        assert len(probes) == 1


def test_v1_against_3x_hides_disabled_and_reports_410_on_update(make_adapter):
    with FakeNacos(version="3.x") as fake:
        fake.add_instance("pay", "10.0.0.1", 80)
        fake.add_instance("pay", "10.0.0.2", 80, enabled=False)
        adapter = make_adapter(fake, api_version="v1")

        (listed,) = adapter.list_instances("pay")  # OPEN_API: still served by 3.x
        assert listed.host == "10.0.0.1"
        assert adapter.lists_disabled is False
        with pytest.raises(RegistryError) as err:
            adapter.set_enabled(listed, False)
        assert "410" in str(err.value) and "v3" in str(err.value)
        assert fake.instance("pay", "10.0.0.1", 80).enabled is True


# -- set_enabled ----------------------------------------------------------------------------


def test_set_enabled_is_a_partial_update(version, make_adapter):
    with FakeNacos(version=version) as fake:
        meta = {"version": "2.0.0", "team": "pay"}
        fake.add_instance("pay", "10.0.0.1", 8080, metadata=meta, weight=3.0)
        adapter = make_adapter(fake)
        (instance,) = adapter.list_instances("pay")

        adapter.set_enabled(instance, False)

        stored = fake.instance("pay", "10.0.0.1", 8080)
        assert (stored.enabled, stored.weight, stored.metadata) == (False, 3.0, meta)
        assert fake.requests_to("/v1/ns/instance", method="PUT") == []  # never the full update
        if version == "3.x":
            (update,) = fake.requests_to("/v3/admin/ns/instance/partial", method="PUT")
        else:
            (update,) = fake.requests_to("/v1/ns/instance", method="PATCH")
        assert update["enabled"] == "false"
        assert (update["serviceName"], update["groupName"]) == ("pay", "DEFAULT_GROUP")
        assert (update["ip"], update["port"], update["clusterName"]) == (
            "10.0.0.1",
            "8080",
            "DEFAULT",
        )

        adapter.set_enabled(instance, True)

        stored = fake.instance("pay", "10.0.0.1", 8080)
        assert (stored.enabled, stored.weight, stored.metadata) == (True, 3.0, meta)


def test_set_enabled_sends_the_current_weight_on_v3(make_adapter):
    with FakeNacos(version="3.x") as fake:
        fake.add_instance("pay", "10.0.0.1", 8080, weight=3.0)
        adapter = make_adapter(fake)
        (instance,) = adapter.list_instances("pay")
        fake.add_instance("pay", "10.0.0.1", 8080, weight=7.0)  # changed by someone else

        adapter.set_enabled(instance, False)

        assert fake.instance("pay", "10.0.0.1", 8080).weight == 7.0


def test_fake_full_put_and_weightless_partial_reset_fields():
    """The fake really punishes the wrong calls, so the test above proves something."""
    with FakeNacos(version="2.x") as v2, FakeNacos(version="3.x") as v3:
        for fake in (v2, v3):
            fake.add_instance("pay", "10.0.0.1", 8080, metadata={"version": "2"}, weight=3.0)
        base = {"serviceName": "pay", "ip": "10.0.0.1", "port": "8080", "enabled": "false"}
        assert httpx.put(f"{v2.url}/v1/ns/instance", params=base).text == "ok"
        assert (
            v2.instance("pay", "10.0.0.1", 8080).weight,
            v2.instance("pay", "10.0.0.1", 8080).metadata,
        ) == (1.0, {})

        reply = httpx.put(f"{v3.url}/v3/admin/ns/instance/partial", params=base).json()
        assert reply == {"code": 0, "message": "success", "data": "ok"}
        stored = v3.instance("pay", "10.0.0.1", 8080)
        assert (stored.enabled, stored.weight, stored.metadata) == (False, 1.0, {"version": "2"})
        assert httpx.put(f"{v3.url}/v1/ns/instance", params=base).status_code == 410


def test_set_enabled_unknown_instance_is_an_error(version, make_adapter):
    with FakeNacos(version=version) as fake:
        fake.add_instance("pay", "10.0.0.1", 8080)
        adapter = make_adapter(fake)
        ghost = RegistryInstance("pay", "x", "10.9.9.9", 1234, 1.0, True, True, {})

        with pytest.raises(RegistryError, match="not registered"):
            adapter.set_enabled(ghost, False)


# -- auth -----------------------------------------------------------------------------------


def test_login_adds_access_token_to_every_request(version, make_adapter):
    with FakeNacos(version=version, username=USER, password=PASSWORD) as fake:
        fake.add_instance("pay", "10.0.0.1", 8080)
        adapter = make_adapter(fake, username=USER, password=PASSWORD)

        assert adapter.list_services() == ["pay"]
        (instance,) = adapter.list_instances("pay")
        adapter.set_enabled(instance, False)

        login_path = "/v3/auth/user/login" if version == "3.x" else "/v1/auth/login"
        (login,) = fake.requests_to("/login")
        assert login == {"username": USER, "password": PASSWORD}
        assert fake.requests_log[1][1] == "/nacos" + login_path
        calls = [p for _m, path, p in fake.requests_log[2:]]
        assert calls and all(p.get("accessToken") for p in calls)
        assert fake.instance("pay", "10.0.0.1", 8080).enabled is False


def test_bad_password_is_a_clear_error(version, make_adapter):
    with FakeNacos(version=version, username=USER, password=PASSWORD) as fake:
        adapter = make_adapter(fake, username=USER, password="hunter2-bad")

        with pytest.raises(RegistryError) as err:
            adapter.list_services()

        message = str(err.value)
        assert "login failed" in message and USER in message and "403" in message
        assert "hunter2-bad" not in message


def test_missing_credentials_is_access_denied(version, make_adapter):
    with FakeNacos(version=version, username=USER, password=PASSWORD) as fake:
        adapter = make_adapter(fake, api_version=expected_api(version))

        with pytest.raises(RegistryError, match="access denied") as err:
            adapter.list_services()
        assert err.value.status == 403


def test_expired_token_is_refreshed_once_on_403(version, make_adapter):
    with FakeNacos(version=version, username=USER, password=PASSWORD) as fake:
        fake.add_instance("pay", "10.0.0.1", 8080)
        adapter = make_adapter(fake, username=USER, password=PASSWORD)
        assert adapter.list_services() == ["pay"]

        fake.expire_tokens()

        assert adapter.list_services() == ["pay"]
        assert logins(fake) == 2


def test_token_is_refreshed_before_its_ttl_runs_out(version, make_adapter):
    now = [1000.0]
    with FakeNacos(version=version, username=USER, password=PASSWORD, token_ttl=100) as fake:
        adapter = make_adapter(fake, username=USER, password=PASSWORD, clock=lambda: now[0])
        adapter.list_services()
        now[0] += 50
        adapter.list_services()
        assert logins(fake) == 1

        now[0] += 45  # inside the last tenth of the ttl
        adapter.list_services()

        assert logins(fake) == 2
        assert fake.requests_log[-2][1].endswith("/login")  # before the call, no 403 needed


def test_error_messages_do_not_leak_the_token(make_adapter):
    with FakeNacos(version="2.x", username=USER, password=PASSWORD) as fake:
        adapter = make_adapter(fake, username=USER, password=PASSWORD)
        adapter.list_services()
        fake.fail_with(500)

        with pytest.raises(RegistryError) as err:
            adapter.list_services()

        token = fake.requests_log[-1][2]["accessToken"]
        assert token not in str(err.value) and "accessToken=%2A%2A%2A" in str(err.value)


# -- failures -------------------------------------------------------------------------------


def test_server_error_is_a_registry_error(version, make_adapter):
    with FakeNacos(version=version) as fake:
        adapter = make_adapter(fake, api_version=expected_api(version))
        fake.fail_with(500, "java.lang.NullPointerException")

        with pytest.raises(RegistryError) as err:
            adapter.list_services()

        message = str(err.value)
        assert "HTTP 500" in message and fake.url in message and "NullPointer" in message
        assert err.value.status == 500


def test_probe_failure_is_a_registry_error(make_adapter):
    with FakeNacos(version="2.x") as fake:
        adapter = make_adapter(fake)
        fake.fail_with(502)
        with pytest.raises(RegistryError, match="502"):
            adapter.list_services()
        fake.fail_with(None)
        assert adapter.list_services() == []  # probes again after the failure


def test_timeout_is_a_registry_error(version, make_adapter):
    with FakeNacos(version=version) as fake:
        adapter = make_adapter(fake, api_version=expected_api(version), timeout=0.25)
        fake.delay(5.0)

        started = time.monotonic()
        with pytest.raises(RegistryError, match="did not answer within 0.25s"):
            adapter.list_services()
        assert time.monotonic() - started < 10 * 0.25  # gave up long before the answer came


def test_connection_refused_is_a_registry_error():
    adapter = NacosAdapter(f"http://127.0.0.1:{free_port()}/nacos", api_version="v1", timeout=1)
    with adapter, pytest.raises(RegistryError, match="cannot connect") as err:
        adapter.list_services()
    assert err.value.status is None


def test_result_envelope_with_error_code_is_a_registry_error(make_adapter):
    with FakeNacos(version="3.x") as fake:
        adapter = make_adapter(fake, api_version="v3")
        fake.fail_with(200, json_body={"code": 30000, "message": "server error", "data": "boom"})

        with pytest.raises(RegistryError, match="code 30000"):
            adapter.list_services()


def test_non_json_answer_is_a_registry_error(make_adapter):
    with FakeNacos(version="2.x") as fake:
        adapter = make_adapter(fake, api_version="v1")
        fake.fail_with(200, "<html>maintenance</html>")

        with pytest.raises(RegistryError, match="non-JSON"):
            adapter.list_services()


# -- factory --------------------------------------------------------------------------------


def test_build_adapter():
    adapter = build_adapter("Nacos", base_url="http://127.0.0.1:8848", namespace="dev")
    try:
        assert isinstance(adapter, NacosAdapter)
        assert adapter.base_url == "http://127.0.0.1:8848/nacos"
        assert (adapter.namespace, adapter.group, adapter.requested_api_version) == (
            "dev",
            "DEFAULT_GROUP",
            "auto",
        )
    finally:
        adapter.close()
    with pytest.raises(ValueError, match="unknown registry kind"):
        build_adapter("zookeeper", base_url="http://127.0.0.1:2181")
    with pytest.raises(ValueError, match="api_version"):
        build_adapter("nacos", base_url="http://127.0.0.1:8848/nacos", api_version="v2")


# -- the fake itself (other suites reuse it) ------------------------------------------------


@pytest.mark.parametrize("version", ["1.x", "2.x"])
def test_fake_v1_register_beat_deregister(version, make_adapter):
    with FakeNacos(version=version) as fake:
        instance = f"{fake.url}/v1/ns/instance"
        base = {"serviceName": "pay", "ip": "10.0.0.1", "port": "8080"}
        meta = json.dumps({"version": "1.0.0"})
        assert httpx.post(instance, params={**base, "metadata": meta}).text == "ok"
        assert httpx.post(instance, params={**base, "weight": "20000"}).status_code == 400
        missing = httpx.post(instance, params={"ip": "10.0.0.1", "port": "80"})
        assert (missing.status_code, missing.text) == (400, "Param 'serviceName' is required.")

        beat = httpx.put(f"{instance}/beat", params={**base, "ip": "10.0.0.2"}).json()
        assert beat["code"] == 20404  # unknown and no beat body: re-register
        beat_body = json.dumps({"ip": "10.0.0.2", "port": 8080, "serviceName": "pay"})
        beat = httpx.put(f"{instance}/beat", params={"serviceName": "pay", "beat": beat_body})
        assert beat.json() == {"clientBeatInterval": 5000, "code": 10200, "lightBeatEnabled": True}

        listed = {i.host: i.metadata for i in make_adapter(fake).list_instances("pay")}
        assert listed == {"10.0.0.1": {"version": "1.0.0"}, "10.0.0.2": {}}

        assert httpx.delete(instance, params=base).text == "ok"
        assert httpx.delete(instance, params=base).text == "ok"  # unknown: silent no-op
        assert fake.instance("pay", "10.0.0.1", 8080) is None


def test_fake_3x_shapes_and_v3_client_api():
    with FakeNacos(version="3.x") as fake:
        fake.add_instance("pay", "10.0.0.1", 8080)
        fake.add_instance("pay", "10.0.0.2", 8080, enabled=False)
        client = f"{fake.url}/v3/client/ns/instance"

        v1 = httpx.get(f"{fake.url}/v1/ns/instance/list", params={"serviceName": "pay"}).json()
        assert "allIps" in v1 and "allIPs" not in v1 and v1["name"] == "DEFAULT_GROUP@@pay"
        assert [h["ip"] for h in v1["hosts"]] == ["10.0.0.1"]
        assert [
            h["ip"]
            for h in httpx.get(f"{client}/list", params={"serviceName": "pay"}).json()["data"]
        ] == ["10.0.0.1"]

        heartbeat = {"serviceName": "new", "ip": "10.0.0.3", "port": "80", "heartBeat": "true"}
        assert httpx.post(client, params=heartbeat).json()["code"] == 21003
        assert httpx.post(client, params={**heartbeat, "heartBeat": "false"}).json()["data"] == "ok"
        admin = httpx.get(f"{fake.url}/v3/admin/ns/instance/list", params={"serviceName": "nope"})
        assert (
            admin.status_code == 404
            and admin.json()["data"] == "service DEFAULT_GROUP@@nope is not found!"
        )
    with FakeNacos(version="2.x") as fake:
        v1 = httpx.get(f"{fake.url}/v1/ns/instance/list", params={"serviceName": "x"}).json()
        assert "allIPs" in v1 and v1["hosts"] == []
        assert httpx.get(f"{fake.url}/v3/admin/ns/service/list").status_code == 404
