"""The Node.js Nacos SDK (nacos-naming 2.6.3 from the npm registry, package-lock.json) against
the embedded registry of a real dashboard process. It sends `username` and `password` on
every call instead of logging in: it registers, lists, is told by its subscription when
another instance joins, deregisters, and is refused with a wrong password; what it does is
what Graylane shows (the instances API)."""

import os
import time
from pathlib import Path

import httpx
import pytest

from testing import scripted_client
from testing.demo_processes import FLEET_PASSWORD, FLEET_USER, fresh_dashboard, manage
from testing.processes import BASE_DIR
from testing.scripted_client import ScriptedClient

pytestmark = pytest.mark.slow

NODE = Path("/usr/bin/node")
SDK = BASE_DIR / "node_modules" / "nacos-naming"
SCRIPT = BASE_DIR / "tests" / "node" / "nacos_client.js"
SERVICE = "node-app"


@pytest.fixture(scope="module")
def sdk_present():
    missing = [str(p) for p in (NODE, SDK) if not p.exists()]
    if missing:
        reason = f"{', '.join(missing)} missing (Debian's nodejs; `npm ci`)"
        if os.environ.get("CI") == "true" or os.environ.get("REQUIRE_BROWSER") == "true":
            pytest.fail(f"{reason}, and CI: the Node.js SDK test must run.")
        pytest.skip(reason)


@pytest.fixture(scope="module")
def var_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("node-sdk")


@pytest.fixture(scope="module")
def dashboard(sdk_present, var_dir):
    with fresh_dashboard(var_dir) as server:
        yield server


@pytest.fixture(scope="module")
def viewer(var_dir, dashboard):
    token = manage(var_dir, "issue_token", "vera", "--role", "viewer").strip().splitlines()[-1]
    with httpx.Client(base_url=dashboard.url, headers={"Authorization": f"Token {token}"}) as api:
        yield api


class NodeClient(ScriptedClient):
    """tests/node/nacos_client.js in its own process."""

    sdk = "the Node.js SDK"

    def __init__(self, dashboard, password: str):
        server = dashboard.url.removeprefix("http://")
        super().__init__([str(NODE), str(SCRIPT), server, FLEET_USER, password], SERVICE)

    def hosts_event(self, timeout: float) -> list[str]:
        return self._next(self.events, timeout)["hosts"]


def graylane_instances(viewer) -> list[tuple[str, int, str]]:
    return scripted_client.graylane_instances(viewer, SERVICE)


def eventually(read, expected, timeout: float = 30.0):
    scripted_client.eventually(read, expected, timeout, every=0.3)


def test_registers_lists_subscribes_and_deregisters_with_username_and_password(dashboard, viewer):
    first, second = NodeClient(dashboard, FLEET_PASSWORD), NodeClient(dashboard, FLEET_PASSWORD)
    try:
        assert first.call("status") == {"op": "status", "ok": True, "result": "UP"}
        assert first.call("register", ip="127.0.0.1", port=7301, metadata={"version": "V1"})["ok"]
        assert first.call("list") == {"op": "list", "ok": True, "result": ["127.0.0.1:7301"]}
        eventually(lambda: [h for h, _, _ in graylane_instances(viewer)], ["127.0.0.1"])
        assert first.call("subscribe")["ok"]
        assert first.hosts_event(timeout=15) == ["127.0.0.1:7301"]

        assert second.call("register", ip="127.0.0.1", port=7302, metadata={"version": "V2"})["ok"]
        # No UDP push from the embedded registry: the SDK polls every cacheMillis (10 s).
        assert sorted(first.hosts_event(timeout=25)) == ["127.0.0.1:7301", "127.0.0.1:7302"]
        eventually(lambda: [p for _, p, _ in graylane_instances(viewer)], [7301, 7302])

        assert second.call("deregister", ip="127.0.0.1", port=7302)["ok"]
        assert first.call("list")["result"] == ["127.0.0.1:7301"]
        # Graylane keeps the row of an instance that left, no longer UP.
        eventually(lambda: [(p, s) for _, p, s in graylane_instances(viewer) if s == "UP"],
                   [(7301, "UP")])  # fmt: skip
    finally:
        first.close()
        second.close()


def test_a_wrong_password_is_refused_and_registers_nothing(dashboard, viewer):
    client = NodeClient(dashboard, "not-the-fleet-password")
    try:
        answer = client.call("register", ip="127.0.0.1", port=7309)
        assert answer["ok"] is False
        assert answer["refusal"]["status"] == 403
        assert "unknown user!" in answer["refusal"]["text"]
        assert client.call("list")["refusal"]["status"] == 403
        time.sleep(6)  # a heartbeat (every 5 s, with the beat info) is refused as well
    finally:
        client.close()
    listed = httpx.get(
        f"{dashboard.url}/nacos/v1/ns/instance/list",
        params={"serviceName": SERVICE, "username": FLEET_USER, "password": FLEET_PASSWORD},
    )
    assert 7309 not in [h["port"] for h in listed.json()["hosts"]]
    assert 7309 not in [p for _, p, _ in graylane_instances(viewer)]
