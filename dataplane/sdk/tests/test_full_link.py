"""The full link: a client request through the real gateway to an instance using the SDK
(chosen by the gray policy), and on from there across an asyncio task, to_thread, a thread
pool, and httpx and requests calls: every hop sees the gateway's decision."""

import sys
import time

import httpx
import pytest

from testing.demo_processes import FLEET_PASSWORD, FLEET_USER
from testing.processes import Process, django_env, free_port

pytestmark = pytest.mark.slow

GRAY_REQUEST = {"gray": "gray-996"}  # the header rule of demo_setup --demo's policy


class ChainInstance(Process):
    def __init__(self, dashboard: str, version: str):
        self.port = free_port()
        args = [sys.executable, "-m", "dataplane.sdk.tests.flag_app", "registered"]
        args += [str(self.port), dashboard + "/nacos", version]
        env = django_env("", REGISTRY_USERNAME=FLEET_USER, REGISTRY_PASSWORD=FLEET_PASSWORD)
        super().__init__(args, env)

    def is_ready(self) -> bool:
        try:
            return httpx.get(f"http://127.0.0.1:{self.port}/flag", timeout=1).is_success
        except httpx.HTTPError:
            return False


def through_gateway(lab, headers, version: str, timeout: float = 30.0) -> dict:
    """The answer of the first request that reaches `version`: the gateway learns of new
    instances within a sync or two, and until V2 is routable a gray request falls back."""
    deadline = time.monotonic() + timeout
    while True:
        response = httpx.get(f"{lab.gateway.url}/chain/fanout", headers=headers, timeout=10)
        seen = response.json() if response.status_code == 200 else {}
        if seen.get("version") == version or time.monotonic() > deadline:
            return seen
        time.sleep(0.2)


def test_the_gateways_decision_reaches_every_hop_of_the_chosen_instance(lab):
    with ChainInstance(lab.dashboard, "V1"), ChainInstance(lab.dashboard, "V2"):
        for headers, flag, version in ((GRAY_REQUEST, "GRAY", "V2"), (None, "PROD", "V1")):
            seen = through_gateway(lab, headers, version)
            assert seen["version"] == version, seen
            hops = ("request", "create_task", "to_thread", "context_pool")
            assert {hop: seen[hop] for hop in hops} == dict.fromkeys(hops, flag)
            for client in ("httpx_async", "httpx_sync"):
                assert seen[client]["header"] == flag
            assert seen["requests"]["header"] == flag
