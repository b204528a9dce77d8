"""The engines under the agent, as real processes: a configuration the engine refuses is
reported in its own words and the one in force keeps routing; a swap of configurations
under keep-alive load fails no request (Envoy)."""

import asyncio
import contextlib
import dataclasses
import json
import socket
import threading
import time
import zlib
from pathlib import Path

import httpx
import pytest

from dataplane.agent.engines import (
    NGINX,
    EnvoyEngine,
    NginxEngine,
    envoy_binary,
    pid_file,
    stop_leftover,
)
from dataplane.agent.ir import Endpoint, compile_document
from dataplane.agent.site import Site
from dataplane.gateway.routing import ConfigError
from testing.agent_lab import ENGINE_MISSING, engines, start_agent
from testing.gateway_lab import UpstreamFleet
from testing.processes import AgentProcess, free_port
from testing.waiting import wait_until
from tests.test_gateway_routing import SEED_RULES

pytestmark = pytest.mark.slow


def generation_of(number: int, upstreams, users=()) -> object:
    instances = [
        {"id": u.name, "host": "127.0.0.1", "port": u.port, "version": u.version, "weight": 1}
        for u in upstreams
    ]
    document = {
        "generation": number,
        "revision": 1,
        "checksum": str(number),
        "gray": {
            **SEED_RULES,
            "users": list(users),
            "user_header": "X-User-No",
            "city_header": "X-City",
            "percent": 0,
        },
        "services": {"user-app": {"prod": "V1", "gray": "V2", "instances": instances}},
    }
    return compile_document(json.dumps(document).encode())


def make_engine(engine: str, tmp_path):
    site = Site("127.0.0.1", free_port(), 0, tmp_path / engine)
    site.directory.mkdir()
    if engine == "envoy":
        return EnvoyEngine(site, envoy_binary())
    return NginxEngine(site, NGINX, reload_interval=0.1)


@pytest.mark.parametrize("engine", engines())
def test_a_configuration_the_engine_refuses_leaves_the_one_in_force(engine, tmp_path):
    with UpstreamFleet() as fleet:
        v1, v2 = fleet.add("V1"), fleet.add("V2")
        proxy = make_engine(engine, tmp_path)
        url = f"http://127.0.0.1:{proxy.site.port}"

        async def run() -> str:
            await proxy.install(generation_of(1, [v1, v2]))
            good = generation_of(2, [v1, v2], users=["1001"])
            # What the dashboard can send but the engine will not take: for nginx a host
            # it cannot resolve, for Envoy an endpoint weight of 0.
            pool = good.pools[1]
            if engine == "nginx":
                bad_endpoint = Endpoint("no-such-host.invalid", 80, 100)
            else:
                bad_endpoint = dataclasses.replace(pool.endpoints[0], weight=0)
            bad = dataclasses.replace(
                good,
                pools=(
                    good.pools[0],
                    dataclasses.replace(pool, endpoints=(bad_endpoint,)),
                    *good.pools[2:],
                ),
            )
            try:
                with pytest.raises(ConfigError) as refused:
                    await proxy.install(bad)
                answer = await asyncio.to_thread(
                    httpx.get, url + "/user-app/hello", headers={"X-User-No": "1001"}
                )
                assert answer.json()["version"] == "V1"  # generation 1: no user rule
                assert (
                    await asyncio.to_thread(httpx.get, url + "/-/readyz")
                ).text == "generation 1\n"
                await proxy.install(good)
                answer = await asyncio.to_thread(
                    httpx.get, url + "/user-app/hello", headers={"X-User-No": "1001"}
                )
                assert answer.json()["version"] == "V2"
                return str(refused.value)
            finally:
                await proxy.stop()

        message = asyncio.run(run())
    if engine == "nginx":
        assert message.startswith(
            'nginx refused it: host not found in upstream "no-such-host.invalid:80"'
        )
    else:
        assert message.startswith("envoy refused it: Proto constraint validation failed")
        assert "LoadBalancingWeight: value must be greater than or equal to 1" in message


@pytest.mark.parametrize("engine", engines())
def test_an_engine_that_cannot_start_says_why(engine, tmp_path):
    """Its listen port is taken: the error carries the engine's own words, not only its
    exit status (the agent exits with them; they are all an operator sees in `make run`)."""
    proxy = make_engine(engine, tmp_path)
    with (
        socket.create_server(("127.0.0.1", proxy.site.port)),
        pytest.raises(RuntimeError, match="Address already in use"),
    ):
        asyncio.run(proxy.install(generation_of(1, [])))


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("engine", engines())
def test_an_engine_whose_agent_was_killed_is_stopped_by_the_next_agent(lab, engine):
    """The agent killed (SIGKILL) before it could stop its engine, which runs in a session of
    its own and so goes on serving: the agent restarted in that workdir on that port stops the
    leftover rather than fail on the port, and the tests' teardown stops one left behind."""
    lab.instance("user-app", "V1")
    lab.sync()
    first = start_agent(lab, engine)
    leftover = _engine_pid(first)
    first.kill()
    assert httpx.get(first.url + "/-/readyz", timeout=2).status_code == 200  # still serving

    again = AgentProcess(
        engine,
        lab.dashboard.url,
        lab.tokens["gw-agent"],
        lab.tmp_path / "gw-agent.json",
        port=first.port,
    )
    lab.gateways.append(again.start())  # ready at once: the leftover answers on the port
    wait_until(lambda: _engine_pid(again) not in (0, leftover), 30, "the engine's restart")
    assert f"Stopped the {engine} a previous agent left running" in again.log()
    assert not _running(leftover)
    wait_until(again.is_ready, 30, "the new engine's answer")
    assert httpx.get(again.url + "/user-app/hello", timeout=2).json()["version"] == "V1"

    engine_pid = _engine_pid(again)
    again.kill()
    assert _running(engine_pid)
    again.stop()  # the teardown's: the agent is gone, its engine is stopped
    assert not _running(engine_pid)
    assert stop_leftover(again.workdir) is False  # nothing left


def _engine_pid(agent: AgentProcess) -> int:
    with contextlib.suppress(FileNotFoundError, ValueError, IndexError):
        return int(pid_file(agent.workdir).read_text().split()[0])
    return 0


def _running(pid: int) -> bool:
    """Not exited (a zombie awaits its parent, which is not this process here)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1]
    except FileNotFoundError:
        return False
    return not state.startswith("Z")


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("engine", engines())
def test_ten_configuration_swaps_under_keep_alive_load(lab, engine):
    """Clients on kept-alive connections while the policy and the instance list change ten
    times, each change acked only once in force: Envoy fails none of their requests."""
    upstreams = [lab.instance("user-app", "V1"), lab.instance("user-app", "V2")]
    lab.sync()
    lab.policy(**SEED_RULES)
    # A generation made in this process (lab.sync) reaches the server's pollers by Redis, or
    # by their next poll without it: short polls.
    agent = start_agent(lab, engine, "--poll-wait", "1")
    stop = threading.Event()
    outcomes: list[str] = []

    def client() -> None:
        with httpx.Client(base_url=agent.url, timeout=5) as session:
            while not stop.is_set():
                try:
                    status = session.get("/user-app/hello", headers={"X-User-No": "7"}).status_code
                    outcomes.append(str(status))
                except httpx.HTTPError as exc:
                    outcomes.append(type(exc).__name__)

    threads = [threading.Thread(target=client) for _ in range(2)]
    for thread in threads:
        thread.start()
    try:
        for change in range(10):
            if change % 2:
                for upstream in upstreams:  # the heartbeat that keeps them in the registry
                    lab.register("user-app", upstream.port, upstream.version)
                upstreams.append(lab.instance("user-app", "V2"))
                lab.sync()
            else:
                lab.policy(users=[str(change)])
            row = _in_sync(agent, lab)
        assert row["last_error"] == ""
    finally:
        stop.set()
        for thread in threads:
            thread.join(10)
    failed = [o for o in outcomes if o != "200"]
    print(f"{engine}: {len(outcomes)} requests, {len(failed)} failed: {set(failed)}")
    assert len(outcomes) > 200
    if engine == "envoy":
        assert failed == []
    else:  # nginx: a reload closes idle kept-alive connections (docs/agent.md)
        assert len(failed) <= 10 * len(threads)


def _in_sync(agent, lab) -> dict:
    name = next(name for name, token in lab.tokens.items() if token in agent.args)
    for _ in range(200):
        row = lab.gateway_row(name)
        if row["status"] == "in_sync" and agent.generation() == row["acked_generation"]:
            return row
        time.sleep(0.05)
    raise AssertionError(f"not in sync: {row}")


@pytest.mark.skipif(envoy_binary() is None, reason=ENGINE_MISSING["envoy"])
def test_envoy_finds_each_listed_user_among_many_and_only_those(tmp_path):
    """Envoy's Lua filter keeps the users as one string indexed by CRC-32: users that share
    a CRC, non-ASCII ones and 100,000 of them are each told apart from those not listed."""
    shared = ("nidmovh", "bubanxn")  # the same zlib.crc32
    assert zlib.crc32(shared[0].encode()) == zlib.crc32(shared[1].encode())
    listed = [str(10_000_000 + n) for n in range(100_000)] + [shared[1], "jürgen", 'quote"d']
    with UpstreamFleet() as fleet:
        v1, v2 = fleet.add("V1"), fleet.add("V2")
        proxy = make_engine("envoy", tmp_path)
        url = f"http://127.0.0.1:{proxy.site.port}/user-app/hello"

        async def run() -> dict[str, str]:
            await proxy.install(generation_of(1, [v1, v2], users=listed))
            try:
                versions = {}
                for user in ("10000000", "10099999", "10100000", *shared, "jürgen", 'quote"d'):
                    answer = await asyncio.to_thread(
                        httpx.get, url, headers={"X-User-No": user.encode("latin-1")}
                    )
                    versions[user] = answer.json()["version"]
                # As the Python gateway reads a header: its bytes as Latin-1, so the UTF-8
                # bytes of jürgen are another user.
                answer = await asyncio.to_thread(
                    httpx.get, url, headers={"X-User-No": "jürgen".encode()}
                )
                versions["jürgen in UTF-8"] = answer.json()["version"]
                return versions
            finally:
                await proxy.stop()

        versions = asyncio.run(run())
    assert versions == {
        "10000000": "V2",
        "10099999": "V2",
        "10100000": "V1",
        "nidmovh": "V1",
        "bubanxn": "V2",
        "jürgen": "V2",
        'quote"d': "V2",
        "jürgen in UTF-8": "V1",
    }
