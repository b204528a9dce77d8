"""`make run` itself, on free ports, a temporary var dir and SQLite: the demo fleet answers
the reference design's scenarios through the gateway, and Ctrl-C (SIGINT to the terminal's
process group) or SIGTERM stops every process it started."""

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import grpc
import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from dataplane.agent.engines import envoy_binary
from embedded_registry.nacos_grpc import payloads
from testing.agent_lab import ENGINE_MISSING
from testing.processes import BASE_DIR, free_port

pytestmark = pytest.mark.slow

PORT_VARIABLES = (
    "GATEWAY_PORT",
    "USER_APP_V1_PORT",
    "USER_APP_V1B_PORT",
    "USER_APP_V2_PORT",
    "USER_APP_V3_PORT",
    "ORDER_APP_V1_PORT",
    "ORDER_APP_V2_PORT",
    "ORDER_APP_V3_PORT",
)
READY_TIMEOUT_S = 90.0


# What the test settings put in this process's environment (graylane/test_settings.py):
# a user's shell running `make run` has none of it.
TEST_SETTINGS_ENV = (
    "SECRET_KEY",
    "GRAYLANE_SECRET_KEYS",
    "DEBUG",
    "ALLOWED_HOSTS",
    "IN_PROCESS_JOBS",
    "DATABASE_URL",
)


def run_env(var_dir: Path, **extra: str) -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("PYTEST_", "DJANGO_", "GATEWAY_")) and key not in TEST_SETTINGS_ENV
    }
    env.update(GRAYLANE_VAR_DIR=str(var_dir), REDIS_URL="", DATABASE_URL="", LOG_LEVEL="WARNING")
    env.update({name: str(free_port()) for name in PORT_VARIABLES})
    env.update(extra)
    return env


def make_run(var_dir: Path, port: int, **extra: str) -> tuple[subprocess.Popen, dict[str, str]]:
    """`make run` as a user types it, in its own session (a terminal's foreground group).
    `-o` keeps make from reinstalling the shared venv when requirements*.txt are newer."""
    env = run_env(var_dir, **extra)
    venv = sys.prefix
    args = ["make", "-o", f"{venv}/.installed", "run", f"VENV={venv}", f"PORT={port}"]
    log = open(var_dir / "make-run.log", "wb")  # noqa: SIM115 (closed with the process)
    popen = subprocess.Popen(
        args, cwd=BASE_DIR, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    popen.log = log  # type: ignore[attr-defined]
    return popen, env


def server_check(grpc_port: int) -> dict:
    """Nacos 2.x's ServerCheckRequest, the first thing its clients send."""
    with grpc.insecure_channel(f"127.0.0.1:{grpc_port}") as channel:
        request = channel.unary_unary(
            "/Request/request",
            request_serializer=payloads.serialize,
            response_deserializer=payloads.Payload.FromString,
        )
        answer = request(payloads.encode("ServerCheckRequest", {}), timeout=10)
    assert answer.metadata.type == "ServerCheckResponse"
    return json.loads(answer.body.value)


def descendants(pid: int) -> set[int]:
    """Every process below `pid`, whatever session it is in (from /proc's parent links)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        parent = int(stat.rpartition(")")[2].split()[1])
        children.setdefault(parent, []).append(int(entry.name))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def instance_pid(port: str) -> int | None:
    """The PID of the demo instance serving `port` (from /proc), None if there is none."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            args = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"demo.service" in args and port.encode() in args:
            index = args.index(port.encode())
            if index > 0 and args[index - 1] == b"--port":
                return int(entry.name)
    return None


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state != "Z"


def wait_for_hello(gateway: str, popen: subprocess.Popen, var_dir: Path) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        assert popen.poll() is None, (var_dir / "make-run.log").read_text()[-4000:]
        try:
            answer = httpx.get(gateway + "/user-app/hello", timeout=2)
            if answer.status_code == 200 and answer.json()["downstream"].get("service"):
                return
        except (httpx.HTTPError, ValueError, KeyError):
            pass
        time.sleep(0.25)
    pytest.fail("no /user-app/hello through the gateway:\n" + log_tail(var_dir))


def log_tail(var_dir: Path) -> str:
    return (var_dir / "make-run.log").read_text(errors="replace")[-4000:]


def stop(popen: subprocess.Popen, signum: int, *, group: bool) -> None:
    if group:
        os.killpg(popen.pid, signum)
    else:
        os.kill(popen.pid, signum)
    try:
        popen.wait(30)
    finally:
        popen.log.close()  # type: ignore[attr-defined]


def kill_all(popen: subprocess.Popen) -> None:
    """After a failure: nothing may outlive the test."""
    pids = descendants(popen.pid)
    os.killpg(popen.pid, signal.SIGKILL)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
    popen.wait()


def requests_seen(gateway: str, service: str) -> float:
    """The gateway's request count for `service` (its Prometheus text at /-/metrics)."""
    text = httpx.get(gateway + "/-/metrics", timeout=2).text
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        if family.name == "graylane_gateway_requests"
        for sample in family.samples
        if sample.labels.get("service") == service
    )


def chain(answer: dict) -> list[tuple[str, str, str]]:
    hops = []
    while answer:
        hops.append((answer["service"], answer["version"], answer["flag"]))
        answer = answer["downstream"]
    return hops


def test_make_run_serves_the_scenarios_and_ctrl_c_stops_everything(tmp_path):
    port = free_port()
    popen, env = make_run(tmp_path, port, DEMO_TRAFFIC_RATE="10")
    try:
        gateway = f"http://127.0.0.1:{env['GATEWAY_PORT']}"
        wait_for_hello(gateway, popen, tmp_path)
        for _ in range(4):  # every instance of each version, round robin
            plain = httpx.get(gateway + "/user-app/hello", timeout=5)
            assert plain.status_code == 200
            assert chain(plain.json()) == [("user-app", "V1", "PROD"), ("order-app", "V1", "PROD")]
        gray = {}
        for _ in range(10):  # V2's small injected error rate: a 500 now and then
            gray = httpx.get(gateway + "/user-app/hello", headers={"gray": "gray-996"}, timeout=5)
            if gray.status_code == 200:
                break
        assert chain(gray.json()) == [("user-app", "V2", "GRAY"), ("order-app", "V2", "GRAY")]
        assert httpx.get(f"http://127.0.0.1:{port}/healthz").status_code == 200
        # The background traffic: only it asks for /order-app/hello through the gateway.
        deadline = time.monotonic() + 15
        while requests_seen(gateway, "order-app") == 0:
            assert time.monotonic() < deadline, "no background traffic through the gateway"
            time.sleep(0.2)
        started = descendants(popen.pid)
        assert len(started) >= 10  # dashboard, 7 instances, gateway, traffic (+ make's shell)
        # `kill` on one prod user-app's PID, as an operator would, under load through the
        # gateway: no request fails (the service SDK's lifecycle), and the fleet starts it again.
        victim = instance_pid(env["USER_APP_V1_PORT"])
        load = subprocess.Popen(
            ["wrk", "-t1", "-c4", "-d8s", gateway + "/user-app/hello"],
            stdout=subprocess.PIPE,
            text=True,
        )
        time.sleep(2)  # the kill comes in the middle of the load, not before it
        os.kill(victim, signal.SIGTERM)
        out = load.communicate(timeout=60)[0]
        assert "requests in" in out and "Non-2xx" not in out and "Socket errors" not in out, out
        deadline = time.monotonic() + 30
        while instance_pid(env["USER_APP_V1_PORT"]) in (None, victim):
            assert time.monotonic() < deadline, "the killed instance was not started again"
            time.sleep(0.2)
    except BaseException:
        kill_all(popen)
        raise
    stop(popen, signal.SIGINT, group=True)  # what a terminal does on Ctrl-C
    left = sorted(pid for pid in started if alive(pid))
    assert left == [], log_tail(tmp_path)
    assert "stopped 10 processes" in log_tail(tmp_path)


def test_demo_false_serves_the_dashboard_alone_and_sigterm_stops_it(tmp_path):
    port = free_port()
    popen, env = make_run(tmp_path, port, DEMO="false")
    try:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while True:
            assert popen.poll() is None and time.monotonic() < deadline, log_tail(tmp_path)
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.25)
        started = descendants(popen.pid)
        with pytest.raises(httpx.ConnectError):
            httpx.get(f"http://127.0.0.1:{env['GATEWAY_PORT']}/user-app/hello")
        # Nacos 2.x gRPC naming, where its clients look: the HTTP port + 1000.
        assert server_check(port + 1000)["resultCode"] == 200
    except BaseException:
        kill_all(popen)
        raise
    stop(popen, signal.SIGTERM, group=False)  # to make alone: it passes it on
    assert [pid for pid in started if alive(pid)] == [], log_tail(tmp_path)
    assert "stopped 1 process" in log_tail(tmp_path)


@pytest.mark.skipif(envoy_binary() is None, reason=ENGINE_MISSING["envoy"])
def test_make_run_with_gateway_engine_envoy_serves_the_demo_through_envoy(tmp_path):
    port = free_port()
    popen, env = make_run(tmp_path, port, DEMO_TRAFFIC_RATE="5", GATEWAY_ENGINE="envoy")
    try:
        gateway = f"http://127.0.0.1:{env['GATEWAY_PORT']}"
        wait_for_hello(gateway, popen, tmp_path)
        plain = httpx.get(gateway + "/user-app/hello", timeout=5)
        assert chain(plain.json()) == [("user-app", "V1", "PROD"), ("order-app", "V1", "PROD")]
        assert "server: envoy" in "\n".join(f"{k}: {v}" for k, v in plain.headers.items())
        assert httpx.get(gateway + "/-/readyz", timeout=5).text.startswith("generation ")
    except BaseException:
        kill_all(popen)
        raise
    started = descendants(popen.pid)
    stop(popen, signal.SIGINT, group=True)
    assert sorted(pid for pid in started if alive(pid)) == [], log_tail(tmp_path)


def eventually(read, expected, timeout: float = 30.0):
    """`read()` once it answers `expected` (the fleet settles: instances register, the
    gateway and the services' balancers read them); fails with the last answer."""
    deadline = time.monotonic() + timeout
    while (got := read()) != expected:
        assert time.monotonic() < deadline, f"{got} != {expected}"
        time.sleep(0.25)
    return got


def test_make_run_lanes_reach_v3_at_both_hops_and_fall_back_to_prod(tmp_path):
    """README, Demo: the lanes demo_setup makes, through the gateway and the service SDK
    (X-Gray-Versions at the second hop), the fallback to prod without an instance of the
    lane's version, and the lanes' share of the traffic on the service page."""
    port = free_port()
    popen, env = make_run(tmp_path, port, DEMO_TRAFFIC_RATE="5")
    try:
        gateway, dashboard = f"http://127.0.0.1:{env['GATEWAY_PORT']}", f"http://127.0.0.1:{port}"
        wait_for_hello(gateway, popen, tmp_path)

        def lane(name: str):
            return lambda: chain(
                httpx.get(gateway + "/user-app/hello", headers={"x-lane": name}, timeout=5).json()
            )

        eventually(lane("feature-x"), [("user-app", "V3", "GRAY"), ("order-app", "V3", "GRAY")])
        # feature-y has order-app only: user-app's prod, then the lane's order-app.
        eventually(lane("feature-y"), [("user-app", "V1", "GRAY"), ("order-app", "V3", "GRAY")])

        issued = subprocess.run(
            [sys.executable, "manage.py", "issue_token", "robot", "--role", "operator"],
            cwd=BASE_DIR, env={**env, "DEBUG": "true"}, check=True, capture_output=True,
            text=True,
        )  # fmt: skip
        auth = {"Authorization": f"Token {issued.stdout.split()[-1]}"}
        listed = httpx.get(f"{dashboard}/api/v1/services/order-app/instances/", headers=auth)
        [v3] = [i["id"] for i in listed.json()["results"] if i["version"] == "V3"]
        offline = httpx.post(f"{dashboard}/api/v1/instances/{v3}/offline/", headers=auth)
        assert offline.status_code == 202, offline.text
        # No instance of order-app V3 up: the lane's requests get its prod there.
        eventually(lane("feature-x"), [("user-app", "V3", "GRAY"), ("order-app", "V1", "GRAY")])
        httpx.post(f"{dashboard}/api/v1/instances/{v3}/online/", headers=auth)
        eventually(lane("feature-x"), [("user-app", "V3", "GRAY"), ("order-app", "V3", "GRAY")])

        # The gateway reports each lane's requests; the service page shows their share.
        with httpx.Client(base_url=dashboard, timeout=5) as browser:
            form = browser.get("/accounts/login/").text
            csrf = form.split('name="csrfmiddlewaretoken" value="')[1].split('"')[0]
            login = {"username": "admin", "password": "graylane-demo"}
            browser.post("/accounts/login/", data={**login, "csrfmiddlewaretoken": csrf})

            def lanes_shown() -> bool:
                page = browser.get("/services/user-app/").text
                split = page.split('id="traffic-split"')[1].split("</section>")[0]
                return all(f'data-name="{name}"' in split for name in ("feature-x", "gray"))

            eventually(lanes_shown, True)
    except BaseException:
        kill_all(popen)
        raise
    started = descendants(popen.pid)
    stop(popen, signal.SIGINT, group=True)
    assert sorted(pid for pid in started if alive(pid)) == [], log_tail(tmp_path)
