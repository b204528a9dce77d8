"""The demo services as real processes on a real dashboard's embedded registry: /hello, the
downstream call that honours and passes on X-Gray-Status, the error switch, and
registration with `version` metadata until the instance stops."""

import asyncio
import time

import httpx
import pytest

from dataplane.registry_client import NamingClient
from testing.demo_processes import (
    FLEET_PASSWORD,
    FLEET_USER,
    DemoInstance,
    fresh_dashboard,
    manage,
)
from testing.waiting import wait_until

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def var_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("demo-services")


@pytest.fixture(scope="module")
def dashboard(var_dir):
    with fresh_dashboard(var_dir) as server:
        yield server


def registered(dashboard, service: str) -> list[tuple[int, str | None]]:
    async def listed():
        async with NamingClient(
            dashboard.url + "/nacos", username=FLEET_USER, password=FLEET_PASSWORD
        ) as client:
            return await client.list_instances(service, healthy_only=True)

    return sorted((i.port, i.version) for i in asyncio.run(listed()))


@pytest.fixture(scope="module")
def fleet(dashboard):
    """user-app V1 (calling order-app) and order-app V1 and V2, registered."""
    instances = [
        DemoInstance(dashboard.url, "user-app", "V1", "--downstream", "order-app"),
        DemoInstance(dashboard.url, "order-app", "V1"),
        DemoInstance(dashboard.url, "order-app", "V2"),
    ]
    try:
        for instance in instances:
            instance.start()
        ports = sorted((i.port, i.version) for i in instances[1:])
        wait_until(lambda: registered(dashboard, "order-app") == ports)
        # user-app's balancer reads the list in the background, every second.
        wait_until(lambda: sees_both_versions(instances[0]))
        yield instances
    finally:
        for instance in instances:
            instance.stop()


def sees_both_versions(user_app) -> bool:
    return {
        hello(user_app, **{"X-Gray-Status": flag}).json()["downstream"].get("version")
        for flag in ("GRAY", "PROD")
    } == {"V1", "V2"}


def hello(instance, **headers):
    return httpx.get(f"{instance.url}/{instance.service}/hello", headers=headers, timeout=5)


def test_user_app_calls_the_order_app_version_its_flag_asks_for(fleet):
    user_v1, order_v1, order_v2 = fleet
    gray = hello(user_v1, **{"X-Gray-Status": "GRAY"})
    assert gray.status_code == 200
    assert gray.json() == {
        "service": "user-app",
        "version": "V1",
        "instance": f"127.0.0.1:{user_v1.port}",
        "flag": "GRAY",
        "downstream": {
            "service": "order-app",
            "version": "V2",
            "instance": f"127.0.0.1:{order_v2.port}",
            "flag": "GRAY",  # passed on
            "downstream": {},
        },
    }
    for _ in range(4):
        prod = hello(user_v1, **{"X-Gray-Status": "PROD"}).json()["downstream"]
        assert (prod["version"], prod["flag"]) == ("V1", "PROD")
    # ALL (gray routing off), or no flag at all: any version, round robin.
    for flag in ("ALL", None):
        headers = {"X-Gray-Status": flag} if flag else {}
        seen = {hello(user_v1, **headers).json()["downstream"]["version"] for _ in range(4)}
        assert seen == {"V1", "V2"}


def test_an_instance_taken_offline_in_the_dashboard_gets_no_more_calls(fleet, dashboard, var_dir):
    user_v1, _, order_v2 = fleet
    token = manage(var_dir, "issue_token", "olga", "--role", "operator").strip().splitlines()[-1]
    api = httpx.Client(base_url=dashboard.url, headers={"Authorization": f"Token {token}"})

    def order_v2_id() -> int | None:  # once the registry sync has seen it (404 until then)
        answer = api.get("/api/v1/services/order-app/instances/")
        rows = answer.json()["results"] if answer.status_code == 200 else []
        return {row["port"]: row["id"] for row in rows}.get(order_v2.port)

    instance_id = wait_until(order_v2_id)

    def gray_goes_to() -> str:
        return hello(user_v1, **{"X-Gray-Status": "GRAY"}).json()["downstream"]["version"]

    assert gray_goes_to() == "V2"
    assert api.post(f"/api/v1/instances/{instance_id}/offline/").status_code == 202
    # No gray instance left: GRAY falls back to prod (within the list's 1 s lifetime).
    wait_until(lambda: gray_goes_to() == "V1", timeout=3)
    assert api.post(f"/api/v1/instances/{instance_id}/online/").status_code == 202
    wait_until(lambda: gray_goes_to() == "V2", timeout=10)


def test_the_error_switch_of_an_instance(fleet):
    _, _, order_v2 = fleet
    switch = f"{order_v2.url}/order-app/-/errors"
    assert httpx.get(switch).json() == {"rate": 0.0}
    assert httpx.post(switch, params={"rate": "1"}).json() == {"rate": 1.0}
    try:
        failed = hello(order_v2)
        assert failed.status_code == 500 and failed.json()["error"] == "injected error"
        assert httpx.post(switch, params={"rate": "1.5"}).status_code == 400
        assert httpx.post(switch, params={"rate": "x"}).status_code == 400
        # Through a proxy (the gateway forwards every path) the switch is refused.
        proxied = httpx.post(switch, params={"rate": "0"}, headers={"X-Forwarded-For": "1.2.3.4"})
        assert proxied.status_code == 403
        assert hello(order_v2).status_code == 500
    finally:
        assert httpx.post(switch, params={"rate": "0"}).json() == {"rate": 0.0}
    assert hello(order_v2).status_code == 200


def test_unknown_paths_are_404(fleet):
    user_v1 = fleet[0]
    assert httpx.get(f"{user_v1.url}/order-app/hello").status_code == 404
    assert httpx.get(f"{user_v1.url}/user-app/nothing").status_code == 404


def test_an_instance_registers_with_its_version_and_deregisters_when_stopped(dashboard):
    instance = DemoInstance(dashboard.url, "stock-app", "V3")
    with instance:
        wait_until(lambda: registered(dashboard, "stock-app") == [(instance.port, "V3")])
    # Gone at once (the beat timeout would take 15 s): it deregistered on SIGTERM.
    assert registered(dashboard, "stock-app") == []


def test_user_app_keeps_calling_order_app_while_the_registry_is_down(tmp_path):
    with fresh_dashboard(tmp_path) as own_dashboard:
        order = DemoInstance(own_dashboard.url, "order-app", "V1").start()
        user = DemoInstance(own_dashboard.url, "user-app", "V1", "--downstream", "order-app")
        try:
            user.start()
            wait_until(lambda: registered(own_dashboard, "order-app") == [(order.port, "V1")])
            assert hello(user).json()["downstream"]["instance"] == f"127.0.0.1:{order.port}"
            own_dashboard.stop()
            time.sleep(1.5)  # past the list's lifetime: the next request reads it again
            answer = hello(user)
            assert answer.status_code == 200
            assert answer.json()["downstream"]["instance"] == f"127.0.0.1:{order.port}"
        finally:
            user.stop()
            order.stop()
