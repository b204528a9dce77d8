"""The production topology of docs/deploy.md with real processes: two dashboard replicas
(uvicorn serving graylane.asgi) on one PostgreSQL (the test database) and one Redis, one
Celery worker, one beat, and gateways. What one replica takes in, the other serves: a
publish, live figures, sampled requests; the release analysis runs once per window
whichever replica the gateways report to; and a gateway (the Python one, or the agent with
each engine) given several replicas keeps its generations coming, and its clients
answered, when the replica it polls is killed or stopped."""

import asyncio
import importlib.util
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter

import httpx
import pytest
import websockets
from django.conf import settings
from django.db import connection

from testing.agent_lab import engines, start_agent
from testing.demo_processes import FLEET_PASSWORD, FLEET_USER
from testing.gateway_lab import auth
from testing.processes import (
    BASE_DIR,
    AsgiServer,
    CeleryBeat,
    CeleryWorker,
    database_url,
    django_env,
)
from testing.waiting import wait_until
from tests.test_release_e2e import Traffic, fleet_with, start_release, wait_for_state

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

POLL_WAIT = 5  # the gateways' long poll, seconds: a killed replica must cost less


@pytest.fixture(scope="module")
def replicas(django_db_setup, django_db_blocker):
    """Replicas A and B, a worker and a beat, all on the test database and REDIS_URL;
    and their environment, for a replica of a test's own."""
    if not settings.REDIS_URL:
        pytest.skip("replicas share their state through Redis: set REDIS_URL")
    if connection.vendor != "postgresql":
        pytest.skip("replicas share PostgreSQL (SQLite is one machine's): a postgres DATABASE_URL")
    with tempfile.TemporaryDirectory() as var_dir:
        env = django_env(database_url(connection.settings_dict), GRAYLANE_VAR_DIR=var_dir)
        with AsgiServer(env) as a, AsgiServer(env) as b, CeleryWorker(env), CeleryBeat(env):
            yield a, b, env


@pytest.fixture(scope="module")
def server(replicas):
    """The lab's dashboard (where it registers instances and changes the policy): A."""
    return replicas[0]


@pytest.fixture
def versions(lab):
    """user-app at V1 and V2, registered as persistent instances: ephemeral ones, which
    send no heartbeats here, would leave traffic 15 s on (Nacos' health timeout)."""
    return fleet_with(lab, "ok")


def login(base_url: str, env: dict[str, str], username: str) -> str:
    """The session cookie of `username`, through the login form. Its password is set by
    the replicas' settings (the tests' own hash it in a way only tests take)."""
    set_password = "from django.contrib.auth.models import User; "
    set_password += f"u = User.objects.get(username={username!r}); "
    set_password += "u.set_password('pw-for-tests'); u.save()"
    manage = [sys.executable, "manage.py", "shell", "-c", set_password]
    subprocess.run(manage, cwd=BASE_DIR, env=env, check=True, capture_output=True)
    with httpx.Client(base_url=base_url) as client:
        page = client.get("/accounts/login/")
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
        assert token, "no CSRF token on the login page"
        answer = client.post(
            "/accounts/login/",
            data={
                "username": username,
                "password": "pw-for-tests",
                "csrfmiddlewaretoken": token[1],
            },
            headers={"Referer": base_url + "/accounts/login/"},
        )
        assert answer.status_code == 302, answer.text[:300]
        return f"sessionid={client.cookies['sessionid']}"


def sent_every_sample(gateway) -> bool:
    return "graylane_gateway_samples_waiting 0.0" in httpx.get(gateway.url + "/-/metrics").text


def test_a_publish_on_one_replica_reaches_a_gateway_polling_the_other_within_a_second(
    lab, versions, replicas
):
    _, b, _ = replicas
    gateway = lab.start_gateway(dashboard=b.url)
    delays = []
    for n in range(10):
        before = gateway.generation()
        lab.policy(users=[f"user-{n}"])  # published by A
        published = time.monotonic()
        wait_until(lambda: gateway.generation() > before, timeout=5, interval=0.01)  # noqa: B023
        delays.append(time.monotonic() - published)
    answer = httpx.get(gateway.url + "/user-app/hello", headers={"X-User-No": "user-9"})
    assert answer.json()["version"] == "V2"  # it routes by the last one
    p50, most = statistics.median(delays), max(delays)
    print(f"publish on A -> gateway on B: p50 {p50:.3f} s, max {most:.3f} s")
    assert max(delays) < 1.0, delays


def test_a_gateway_renamed_or_deleted_through_one_replica_is_seen_so_by_the_other_within_a_second(
    replicas, make_user
):
    # B remembers who polls (gateways/protocol/callers.py); A's change reaches it over Redis.
    from accounts.models import ApiToken
    from accounts.roles import ADMIN
    from gateways.models import Gateway
    from gateways.protocol.endpoints import NAME_HEADER

    a, b, _ = replicas
    _, token, _ = Gateway.objects.create_with_credentials(name="edge-remembered")
    _, admin_key = ApiToken.objects.issue(make_user("replica-admin", ADMIN))
    admin = {"Authorization": f"Token {admin_key}"}

    def poll_b() -> httpx.Response:
        return httpx.get(
            b.url + "/api/v1/gateway-config/?wait=0", headers={"Authorization": f"Token {token}"}
        )

    assert poll_b().headers[NAME_HEADER] == "edge-remembered"
    assert poll_b().headers[NAME_HEADER] == "edge-remembered"
    changed = httpx.patch(
        a.url + "/api/v1/gateways/edge-remembered/", json={"name": "edge-renamed"}, headers=admin
    )
    assert changed.status_code == 200, changed.text
    since = time.monotonic()
    wait_until(lambda: poll_b().headers.get(NAME_HEADER) == "edge-renamed", 1.0, interval=0.01)
    renamed_after = time.monotonic() - since
    deleted = httpx.delete(a.url + "/api/v1/gateways/edge-renamed/", headers=admin)
    assert deleted.status_code == 204, deleted.text
    since = time.monotonic()
    wait_until(lambda: poll_b().status_code == 401, 1.0, interval=0.01)
    deleted_after = time.monotonic() - since
    print(f"on B: renamed after {renamed_after:.3f} s, refused after {deleted_after:.3f} s")


def test_a_websocket_on_one_replica_sees_the_figures_of_samples_posted_to_the_other(
    lab, versions, replicas, make_user
):
    a, b, env = replicas
    make_user("vera", "viewer")
    cookie = login(a.url, env, "vera")
    gateway = lab.start_gateway(dashboard=b.url)  # its metric reports go to B only

    async def watch() -> dict:
        ws_url = a.url.replace("http://", "ws://") + "/ws/live/"
        async with websockets.connect(
            ws_url, additional_headers={"Cookie": cookie, "Origin": a.url}
        ) as socket:
            await socket.send(json.dumps({"subscribe": ["user-app"]}))
            async with httpx.AsyncClient(base_url=gateway.url) as client:
                deadline = time.monotonic() + 20
                while time.monotonic() < deadline:
                    answer = await client.get("/user-app/hello")
                    assert answer.status_code == 200
                    try:
                        message = json.loads(await asyncio.wait_for(socket.recv(), 0.2))
                    except TimeoutError:
                        continue
                    if message["type"] == "metrics" and message["total"] > 0:
                        return message
        raise AssertionError("no live figures of user-app on A")

    message = asyncio.run(watch())
    assert (message["service"], message["version"]) == ("user-app", "V1")


def test_an_impact_preview_on_one_replica_reads_the_requests_sampled_to_the_other(
    lab, versions, replicas
):
    _, b, _ = replicas
    gateway = lab.start_gateway("--sample-rate", "1", dashboard=b.url)
    users = [f"{uuid.uuid4().hex[:12]}" for _ in range(20)]  # none of an earlier run's
    for user in users:
        answer = httpx.get(gateway.url + "/user-app/hello", headers={"X-User-No": user})
        assert answer.json()["version"] == "V1"
    wait_until(lambda: sent_every_sample(gateway), what="the gateway's samples to reach B")

    live = httpx.get(lab.dashboard.url + "/api/v1/policy/", headers=auth(lab.operator_token))
    draft = {**live.json(), "users": users}
    answer = httpx.post(  # on A
        lab.dashboard.url + "/api/v1/policy/preview/",
        json={"policy": draft},
        headers=auth(lab.operator_token),
    )
    assert answer.status_code == 200, answer.text
    matched = {r["value"]: r["matched"] for r in answer.json()["rules"] if r["rule"] == "user"}
    assert all(matched[user] >= 1 for user in users), matched
    assert answer.json()["services"]["user-app"]["users_moved"] >= len(users)


def test_a_releases_analysis_runs_once_per_window_with_two_replicas(lab, replicas):
    a, b, _ = replicas
    fleet_with(lab, "ok")
    # The gateway's reports alternate between replicas only if one fails; two gateways,
    # one on each, send every window's figures to both.
    gateways = [
        lab.start_gateway(name="gw-a", dashboard=a.url),
        lab.start_gateway(name="gw-b", dashboard=b.url),
    ]
    with Traffic(gateways[0]), Traffic(gateways[1]):
        release = start_release(lab)
        final = wait_for_state(release, {"rolled_back", "promoted", "failed"}, timeout=90)
    assert final["state"] == "promoted", final
    events = httpx.get(release["url"] + "/events/", headers=release["headers"]).json()["results"]
    windows = Counter(
        (e["detail"]["window_start"], e["detail"]["window_end"])
        for e in events
        if e["kind"] in ("analysis", "insufficient_data")
    )
    assert len(windows) >= 3  # one per step at least
    assert set(windows.values()) == {1}, windows
    ordered = sorted(windows)
    assert all(end <= start for (_, end), (start, _) in zip(ordered, ordered[1:], strict=False))


@pytest.mark.parametrize(
    ("kind", "end"),
    [
        ("python", "kill"),
        ("python", "stop"),
        *(pytest.param(engine.values[0], "kill", marks=engine.marks) for engine in engines()),
    ],
)
def test_a_gateway_fails_over_when_the_replica_it_polls_is_killed_or_stopped(
    lab, versions, replicas, kind, end
):
    """The Python gateway, and the agent driving each engine. `kill`: SIGKILL, the machine
    lost; `stop`: SIGTERM, a replica stopped for an upgrade (uvicorn closes the open long
    polls after its graceful timeout)."""
    a, b, env = replicas
    with AsgiServer(env) as doomed:
        extra, dashboards = ("--poll-wait", str(POLL_WAIT)), f"{doomed.url},{b.url}"
        if kind == "python":
            gateway = lab.start_gateway(*extra, dashboard=dashboards)
            name = "gw-test"
        else:
            gateway = start_agent(lab, kind, *extra, dashboard=dashboards)
            name = "gw-agent"
        wait_until(lambda: lab.gateway_row(name)["status"] == "in_sync", what="the first ack")
        with Traffic(gateway) as traffic:
            time.sleep(0.5)  # requests under way, and the gateway's poll waiting on `doomed`
            before = gateway.generation()
            doomed.kill() if end == "kill" else doomed.stop()
            lab.policy(users=["after-the-kill"])  # on A
            published = time.monotonic()
            wait_until(
                lambda: gateway.generation() > before,
                timeout=POLL_WAIT,
                interval=0.01,
                what="the next generation through B",
            )
            delay = time.monotonic() - published
            wait_until(
                lambda: lab.gateway_row(name)["status"] == "in_sync",
                what="its ack, through B",
            )
            time.sleep(0.5)
    answered = sum(count for status, count in traffic.statuses.items() if status == 200)
    print(f"failover ({kind}, {end}): next generation {delay:.3f} s after; {traffic.statuses}")
    assert answered > 0 and set(traffic.statuses) == {200}, traffic.statuses
    answer = httpx.get(gateway.url + "/user-app/hello", headers={"X-User-No": "after-the-kill"})
    assert answer.json()["version"] == "V2"


def test_nacos_grpc_pushes_reach_subscribers_on_every_replica_and_a_dead_ones_instances_expire(
    replicas,
):
    """A nacos-sdk-python 2.x subscriber on A is pushed what a client registers on B (the
    change goes through Redis); a client on a replica of its own whose replica is killed
    keeps its instance, no longer renewed, until Nacos' heartbeat timeout (15 s: unhealthy)
    and delete timeout (30 s: gone)."""
    from tests.test_nacos_grpc_client import GrpcClient, http_hosts, next_hosts

    if importlib.util.find_spec("v2") is None and os.environ.get("CI") != "true":
        pytest.skip("nacos-sdk-python 2.x missing (`pip install -r requirements-dev.txt`)")
    a, b, env = replicas
    make_fleet = "from django.contrib.auth.models import Group, User; "
    make_fleet += f"u, _ = User.objects.get_or_create(username={FLEET_USER!r}); "
    make_fleet += f"u.set_password({FLEET_PASSWORD!r}); u.save(); "
    make_fleet += "u.groups.add(Group.objects.get_or_create(name='service')[0])"
    manage = [sys.executable, "manage.py", "shell", "-c", make_fleet]
    subprocess.run(manage, cwd=BASE_DIR, env=env, check=True, capture_output=True)

    with AsgiServer(env) as doomed_replica:
        watcher, joiner = GrpcClient(a), GrpcClient(b)
        doomed = GrpcClient(doomed_replica)
        try:
            assert watcher.call("register", ip="127.0.0.1", port=7441)["ok"]
            assert watcher.call("list")["result"] == ["127.0.0.1:7441"]
            assert watcher.call("subscribe")["ok"]
            sent = time.time()
            assert joiner.call("register", ip="127.0.0.1", port=7442)["ok"]
            pushed = next_hosts(watcher, ["127.0.0.1:7441", "127.0.0.1:7442"])
            print(f"\npush latency across replicas: {(pushed['at'] - sent) * 1000:.0f} ms")

            assert doomed.call("register", ip="127.0.0.1", port=7443)["ok"]
            next_hosts(watcher, ["127.0.0.1:7441", "127.0.0.1:7442", "127.0.0.1:7443"])
            doomed_replica.kill()
            killed = time.monotonic()
            hosts = lambda: {  # noqa: E731
                f"{h['ip']}:{h['port']}": h["healthy"] for h in _nacos_list(a)["hosts"]
            }
            time.sleep(5)
            assert hosts()["127.0.0.1:7443"] is True  # within the heartbeat timeout
            wait_until(lambda: hosts().get("127.0.0.1:7443") is False, timeout=20)
            assert time.monotonic() - killed > 10
            wait_until(lambda: "127.0.0.1:7443" not in hosts(), timeout=30)
            next_hosts(watcher, ["127.0.0.1:7441", "127.0.0.1:7442"], timeout=5)
            assert http_hosts(a) == ["127.0.0.1:7441", "127.0.0.1:7442"]
        finally:
            for client in (watcher, joiner, doomed):
                client.close()


def _nacos_list(replica) -> dict:
    login = httpx.post(
        f"{replica.url}/nacos/v1/auth/login",
        data={"username": FLEET_USER, "password": FLEET_PASSWORD},
    )
    return httpx.get(
        f"{replica.url}/nacos/v1/ns/instance/list",
        params={"serviceName": "grpc-app", "accessToken": login.json()["accessToken"]},
    ).json()
