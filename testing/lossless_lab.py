"""The world of the lossless-lifecycle tests and of bench/lossless.py: a dashboard (fresh
SQLite, set up as `make run` does, its embedded registry synced every 0.5 s), the demo gateway
in front of it, instances of `dataplane/sdk/tests/lifecycle_app.py` registering themselves, a
steady load through the gateway, and restarts (SIGTERM, and a replacement started at once, as
an orchestrator rolls a deployment)."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from testing.demo_processes import FLEET_PASSWORD, FLEET_USER, fresh_dashboard, fresh_env
from testing.processes import BASE_DIR, GatewayProcess, Process, django_env, free_port

SERVICE = "svc"
SYNC_INTERVAL_S = 0.5


def issue_token(var_dir: Path, username: str, role: str) -> str:
    issued = subprocess.run(
        [sys.executable, "manage.py", "issue_token", username, "--role", role],
        cwd=BASE_DIR,
        env=fresh_env(var_dir),
        check=True,
        capture_output=True,
        text=True,
    )
    return issued.stdout.strip().splitlines()[-1]


class LifecycleInstance(Process):
    """lifecycle_app on a free port, registering in the dashboard's embedded registry and
    reporting its lifecycle there; ready once its port answers (not once it serves)."""

    def __init__(self, dashboard: str, mode: str, *, warmup_s: float = 0.0, token: str = ""):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.mode = mode
        args = [sys.executable, "-m", "dataplane.sdk.tests.lifecycle_app", "--service", SERVICE]
        args += ["--port", str(self.port), "--registry", dashboard + "/nacos"]
        args += ["--username", FLEET_USER, "--dashboard", dashboard, "--mode", mode]
        args += ["--warmup-s", str(warmup_s)]
        env = django_env("", REGISTRY_PASSWORD=FLEET_PASSWORD, GRAYLANE_LIFECYCLE_TOKEN=token)
        super().__init__(args, env)

    def is_ready(self) -> bool:
        try:
            return httpx.get(f"{self.url}/{SERVICE}/-/stats", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    def stats(self) -> dict:
        return httpx.get(f"{self.url}/{SERVICE}/-/stats", timeout=2).json()

    def terminate(self) -> None:
        """SIGTERM to the process alone, as `kill PID` does."""
        assert self.popen is not None
        self.popen.terminate()

    def wait(self, timeout: float) -> int:
        assert self.popen is not None
        return self.popen.wait(timeout)


WRK_POST = """wrk.method = "POST"
wrk.body = "{}"
wrk.headers["Content-Type"] = "application/json"
"""


@dataclass
class LoadResult:
    requests: int
    seconds: float
    non_2xx: int
    socket_errors: dict[str, int]
    latency_ms: dict[str, float]  # wrk's percentiles: "50%", "75%", "90%", "99%"

    @property
    def failed(self) -> int:
        return self.non_2xx + sum(self.socket_errors.values())

    @property
    def success_percent(self) -> float:
        return 100.0 * (self.requests - self.failed) / self.requests if self.requests else 0.0

    @property
    def rate(self) -> float:
        return self.requests / self.seconds


def _milliseconds(text: str) -> float:
    for unit, factor in (("us", 0.001), ("ms", 1.0), ("s", 1000.0), ("m", 60_000.0)):
        if text.endswith(unit):
            return float(text[: -len(unit)]) * factor
    raise ValueError(text)


def parse_wrk(out: str) -> LoadResult:
    lines = out.splitlines()
    done = next(line for line in lines if "requests in" in line).split()
    requests, seconds = int(done[0]), _milliseconds(done[3].rstrip(",")) / 1000
    non_2xx = next((int(line.split()[-1]) for line in lines if "Non-2xx" in line), 0)
    errors: dict[str, int] = {}
    for line in lines:
        if "Socket errors:" in line:
            for part in line.split(":", 1)[1].split(","):
                kind, count = part.split()
                errors[kind] = int(count)
    latency = {}
    if "Latency Distribution" in out:
        at = next(i for i, line in enumerate(lines) if "Latency Distribution" in line)
        for line in lines[at + 1 : at + 5]:
            percent, value = line.split()
            latency[percent] = _milliseconds(value)
    return LoadResult(requests, seconds, non_2xx, errors, latency)


class Load:
    """`wrk` POSTing to `url` for `seconds` over `connections` keep-alive connections (a
    closed loop: as fast as answers come back); a 10 s timeout counts as a failure."""

    def __init__(self, url: str, seconds: float, connections: int = 8):
        self.script = Path(tempfile.mkstemp(prefix="graylane-wrk-", suffix=".lua")[1])
        self.script.write_text(WRK_POST)
        self.args = ["wrk", "-t1", f"-c{connections}", f"-d{seconds:.0f}s", "--timeout", "10s"]
        self.args += ["--latency", "-s", str(self.script), url]
        self.popen: subprocess.Popen | None = None

    def start(self) -> Load:
        self.popen = subprocess.Popen(self.args, stdout=subprocess.PIPE, text=True)
        return self

    def result(self) -> LoadResult:
        assert self.popen is not None
        try:
            out, _ = self.popen.communicate(timeout=120)
        finally:
            self.script.unlink(missing_ok=True)
        return parse_wrk(out)


@dataclass
class Lab:
    dashboard: str
    var_dir: Path
    gateway: GatewayProcess
    fleet_token: str
    viewer_token: str
    instances: list[LifecycleInstance] = field(default_factory=list)

    def instance(self, mode: str, *, warmup_s: float = 0.0) -> LifecycleInstance:
        instance = LifecycleInstance(
            self.dashboard, mode, warmup_s=warmup_s, token=self.fleet_token
        ).start()
        self.instances.append(instance)
        return instance

    def wait_routed(self, ports: set[int], timeout: float = 30.0) -> None:
        """Until the gateway has sent requests to each of `ports`, and only those."""
        deadline = time.monotonic() + timeout
        seen: set[int] = set()
        with httpx.Client(timeout=5) as client:
            while time.monotonic() < deadline:
                seen = set()
                for _ in range(4 * len(ports)):
                    response = client.post(f"{self.gateway.url}/{SERVICE}/work")
                    if response.status_code == 200:
                        seen.add(response.json()["instance"])
                if seen == ports:
                    return
                time.sleep(0.2)
        raise AssertionError(f"the gateway routes to {seen}, not {ports}")

    def lifecycle(self, port: int) -> list[dict]:
        """The events the dashboard has of the instance on `port`, oldest first."""
        response = httpx.get(
            f"{self.dashboard}/api/v1/services/{SERVICE}/lifecycle/",
            headers={"Authorization": f"Token {self.viewer_token}"},
        )
        rows = [row for row in response.json()["results"] if row["port"] == port]
        return list(reversed(rows))

    def stop_instances(self) -> None:
        for instance in self.instances:
            instance.stop()
        self.instances.clear()


@contextlib.contextmanager
def lossless_lab(var_dir: Path) -> Iterator[Lab]:
    with fresh_dashboard(var_dir) as dashboard:
        admin = issue_token(var_dir, "lab-admin", "admin")
        viewer = issue_token(var_dir, "lab-viewer", "viewer")
        fleet = issue_token(var_dir, FLEET_USER, "service")
        auth = {"Authorization": f"Token {admin}"}
        registries = httpx.get(f"{dashboard.url}/api/v1/registries/", headers=auth).json()
        for registry in registries["results"]:
            httpx.patch(
                f"{dashboard.url}/api/v1/registries/{registry['id']}/",
                json={"sync_interval": SYNC_INTERVAL_S},
                headers=auth,
            ).raise_for_status()
        token = (var_dir / "demo-gateway.token").read_text().strip()
        with GatewayProcess(dashboard.url, token, var_dir / "gateway-cache.json") as gateway:
            lab = Lab(dashboard.url, var_dir, gateway, fleet, viewer)
            try:
                yield lab
            finally:
                lab.stop_instances()
