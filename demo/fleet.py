"""What `make run` runs after migrating: the dashboard and, unless `--no-demo`, the demo
fleet, each a child process, until Ctrl-C (SIGINT) or SIGTERM stops them all.

    python -m demo.fleet --listen 127.0.0.1:8000 [--no-demo]

Started in this order, each once the one before answers: the dashboard (uvicorn serving
graylane.asgi), the demo instances (user-app and order-app, V1, V2 and V3, registered in the
embedded registry), the demo gateway (a pull gateway, `python -m dataplane.gateway`, or with
GATEWAY_ENGINE=envoy|nginx `python -m dataplane.agent` driving that proxy), and
the background traffic once the gateway routes. Stopped in the reverse order, so instances
deregister while the registry still answers. Ports come from the environment (README:
Configuration): GATEWAY_PORT, USER_APP_V1_PORT, USER_APP_V1B_PORT, USER_APP_V2_PORT,
USER_APP_V3_PORT, ORDER_APP_V1_PORT, ORDER_APP_V2_PORT, ORDER_APP_V3_PORT. A demo instance
that exits (`kill PID`) is started again.

The gateway's record and token, the fleet's registry user, the starting policy and the
lanes are made by `manage.py demo_setup --demo` before this runs; this module imports no
Django.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

import httpx

from .supervisor import Child

log = logging.getLogger("demo.fleet")

GRAY_HEADER = {"gray": "gray-996"}
DASHBOARD_READY_TIMEOUT_S = 60.0
FLEET_READY_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 8.0
# A demo instance that exits sooner than this after its start is not started again: it
# would only fail again.
RESTART_MIN_UPTIME_S = 10.0


@dataclass(frozen=True)
class DemoInstance:
    service: str
    version: str
    port_env: str
    default_port: int
    downstream: str | None = None

    @property
    def port(self) -> int:
        return int(os.environ.get(self.port_env) or self.default_port)

    @property
    def name(self) -> str:
        return f"{self.service} {self.version} :{self.port}"


# The reference design's fleet: user-app calls order-app; V2 is the gray version. V3 is the
# version of the demo's lanes (demo_setup: feature-x has both services' V3, feature-y
# order-app's only).
INSTANCES = (
    DemoInstance("user-app", "V1", "USER_APP_V1_PORT", 7201, downstream="order-app"),
    # Two of prod user-app: SIGTERM to either (`kill PID`) loses nothing (the service SDK's
    # lifecycle), and the fleet starts it again, as an orchestrator would.
    DemoInstance("user-app", "V1", "USER_APP_V1B_PORT", 7203, downstream="order-app"),
    DemoInstance("user-app", "V2", "USER_APP_V2_PORT", 7202, downstream="order-app"),
    DemoInstance("user-app", "V3", "USER_APP_V3_PORT", 7204, downstream="order-app"),
    DemoInstance("order-app", "V1", "ORDER_APP_V1_PORT", 7301),
    DemoInstance("order-app", "V2", "ORDER_APP_V2_PORT", 7302),
    DemoInstance("order-app", "V3", "ORDER_APP_V3_PORT", 7303),
)


class Stop(Exception):
    """A stop signal (SIGINT, SIGTERM, SIGHUP) arrived."""


def _host_port(listen: str) -> tuple[str, int]:
    host, _, port = listen.rpartition(":")
    return host.strip("[]") or "127.0.0.1", int(port)


def _url(host: str, port: int) -> str:
    host = "127.0.0.1" if host in ("0.0.0.0", "") else host
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def _answers(url: str, headers: dict[str, str] | None = None) -> httpx.Response | None:
    try:
        return httpx.get(url, headers=headers, timeout=2.0)
    except httpx.HTTPError:
        return None


def _check_free(host: str, port: int, what: str) -> None:
    """Fail fast, and say which setting to change, when something else holds a port: the
    readiness probes would otherwise talk to that something."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            raise SystemExit(f"{what}: cannot listen on {host}:{port} ({exc.strerror})") from None


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


class Fleet:
    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.host, self.port = _host_port(args.listen)
        self.dashboard_url = _url(self.host, self.port)
        self.gateway_port = int(os.environ.get("GATEWAY_PORT") or 8080)
        self.gateway_url = _url("127.0.0.1", self.gateway_port)
        self.children: list[Child] = []
        self.restartable: dict[str, float] = {}  # demo instance name -> when it was started
        self.stop_signal: str | None = None  # set by the signal handler, checked by the loops

    def on_signal(self, signum: int, _frame: FrameType | None) -> None:
        self.stop_signal = signal.Signals(signum).name

    def _check_stop(self) -> None:
        if self.stop_signal is not None:
            raise Stop(self.stop_signal)

    def _start(self, name: str, args: list[str], env: dict[str, str] | None = None) -> Child:
        self._check_stop()
        child = Child(name, args, env).start()
        self.children.append(child)
        log.info("started %s (pid %s)", name, child.pid)
        return child

    def _wait(self, what: str, ready: Callable[[], bool], timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while not ready():
            self._check_stop()
            for child in self.children:
                code = child.exited()
                if code is not None:
                    raise SystemExit(f"{child.name} exited with code {code} while starting")
            if time.monotonic() > deadline:
                log.warning("%s: not ready after %.0f s", what, timeout)
                return False
            time.sleep(0.1)
        return True

    def check_ports(self) -> None:
        _check_free(self.host, self.port, "the dashboard (PORT)")
        # The dashboard serves Nacos 2.x gRPC naming beside it, where Nacos clients look.
        grpc_port = int(os.environ.get("EMBEDDED_REGISTRY_GRPC_PORT") or self.port + 1000)
        _check_free(
            self.host, grpc_port, "its Nacos 2.x gRPC (PORT + 1000, EMBEDDED_REGISTRY_GRPC_PORT)"
        )
        if not self.args.no_demo:
            _check_free("127.0.0.1", self.gateway_port, "the demo gateway (GATEWAY_PORT)")
            for instance in INSTANCES:
                _check_free("127.0.0.1", instance.port, f"{instance.name} ({instance.port_env})")

    def start_dashboard(self) -> None:
        args = [sys.executable, "-m", "uvicorn", "--host", self.host, "--port", str(self.port)]
        # No access log: the fleet's beats and lookups would bury everything else.
        args += ["--lifespan", "off", "--timeout-graceful-shutdown", "5", "--no-access-log"]
        env = dict(os.environ)
        if not self.args.no_demo:  # the service page's "restart instance" for the demo fleet
            env.setdefault("DEMO_RESTART", "true")
        self.dashboard = self._start("dashboard", [*args, "graylane.asgi:application"], env)
        self._wait(
            "dashboard",
            lambda: _answers(self.dashboard_url + "/healthz") is not None,
            DASHBOARD_READY_TIMEOUT_S,
        )

    def start_fleet(self) -> None:
        # The fleet user's API token (demo_setup writes it): no password hash to check on
        # every start, which a busy machine may take seconds for.
        fleet_token = Path(self.args.fleet_token_file).read_text().strip()
        env = {**os.environ, "REGISTRY_ACCESS_TOKEN": fleet_token}
        for instance in INSTANCES:
            args = [sys.executable, "-m", "demo.service"]
            args += ["--service", instance.service, "--version", instance.version]
            args += ["--port", str(instance.port), "--registry", self.dashboard_url + "/nacos"]
            if instance.downstream:
                args += ["--downstream", instance.downstream]
            if instance.version == "V2":
                args += ["--error-rate", str(self.args.v2_error_rate)]
            self._start(instance.name, args, env)
            self.restartable[instance.name] = time.monotonic()
        self._wait(
            "demo services",
            lambda: all(_listening(instance.port) for instance in INSTANCES),
            FLEET_READY_TIMEOUT_S,
        )
        # The token in the environment, not on the command line every local user can read.
        token = Path(self.args.gateway_token_file).read_text().strip()
        # GATEWAY_ENGINE=envoy|nginx: the agent drives that proxy as the demo gateway.
        engine = os.environ.get("GATEWAY_ENGINE", "").strip().lower()
        module = "dataplane.agent" if engine in ("envoy", "nginx") else "dataplane.gateway"
        args = [sys.executable, "-m", module, "--dashboard", self.dashboard_url]
        args += ["--name", self.args.gateway_name, "--listen", f"127.0.0.1:{self.gateway_port}"]
        args += ["--cache-file", self.args.gateway_cache_file]
        if module == "dataplane.agent":
            workdir = Path(self.args.gateway_cache_file).with_name(f"demo-gateway-{engine}")
            args += ["--engine", engine, "--workdir", str(workdir)]
        self._start("gateway", args, {**os.environ, "GATEWAY_TOKEN": token})
        routed = self._wait("gateway", self._routes_both_ways, FLEET_READY_TIMEOUT_S)
        self._start(
            "traffic",
            [sys.executable, "-m", "demo.traffic", "--gateway", self.gateway_url]
            + ["--rate", str(self.args.traffic_rate)],
        )
        if routed:
            hello = self.gateway_url + "/user-app/hello"
            print(
                f"\nDemo fleet up. Try:\n  curl {hello}\n  curl -H 'gray: gray-996' {hello}\n"
                f"  curl -H 'x-lane: feature-x' {hello}\n"
                f"Dashboard: {self.dashboard_url}/   Ctrl-C stops everything.\n",
                flush=True,
            )

    def _routes_both_ways(self) -> bool:
        """The gateway has the instances: a plain and a gray request both get an answer."""
        return all(
            (answer := _answers(self.gateway_url + "/user-app/hello", headers)) is not None
            and answer.status_code == 200
            for headers in (None, GRAY_HEADER)
        )

    def watch(self) -> None:
        """Until a signal: a demo instance that exits is started again (unless it had only
        just started); another child that exits is reported; the dashboard exiting ends all."""
        reported: set[int] = set()
        while True:
            self._check_stop()
            for index, child in enumerate(self.children):
                code = child.exited()
                if code is None or id(child) in reported:
                    continue
                if child is self.dashboard:
                    raise SystemExit(f"the dashboard exited with code {code}")
                started = self.restartable.get(child.name)
                if started is not None and time.monotonic() - started >= RESTART_MIN_UPTIME_S:
                    log.warning("%s (pid %s) exited with code %s: starting it again",
                                child.name, child.pid, code)  # fmt: skip
                    child.stop(0)  # reaps it, and whatever it left in its group
                    self.children[index] = Child(child.name, child.args, child.env).start()
                    self.restartable[child.name] = time.monotonic()
                    continue
                reported.add(id(child))
                log.warning("%s (pid %s) exited with code %s", child.name, child.pid, code)
            time.sleep(0.5)

    def stop(self) -> None:
        # Ignore further signals while stopping: a second Ctrl-C must not leave children.
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, signal.SIG_IGN)
        for child in reversed(self.children):
            child.stop(STOP_TIMEOUT_S)
        count = len(self.children)
        log.info("stopped %d process%s", count, "" if count == 1 else "es")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m demo.fleet", description=__doc__)
    parser.add_argument("--listen", default="127.0.0.1:8000", help="the dashboard's HOST:PORT")
    parser.add_argument("--no-demo", action="store_true", help="the dashboard alone")
    parser.add_argument("--gateway-name", default="demo-gateway")
    var_dir = Path(os.environ.get("GRAYLANE_VAR_DIR") or "var")  # as graylane.settings
    parser.add_argument("--gateway-token-file", default=str(var_dir / "demo-gateway.token"))
    parser.add_argument("--gateway-cache-file", default=str(var_dir / "demo-gateway.cache.json"))
    parser.add_argument("--fleet-token-file", default=str(var_dir / "demo-fleet.token"))
    parser.add_argument(
        "--v2-error-rate",
        type=float,
        default=float(os.environ.get("DEMO_V2_ERROR_RATE") or 0.01),
        help="share of V2's answers that are an injected 500",
    )
    parser.add_argument(
        "--traffic-rate",
        type=float,
        default=float(os.environ.get("DEMO_TRAFFIC_RATE") or 4),
        help="background requests per second",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # the readiness probes
    fleet = Fleet(parse_args(argv))
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):  # SIGHUP: terminal closed
        signal.signal(signum, fleet.on_signal)
    try:
        fleet.check_ports()
        fleet.start_dashboard()
        if not fleet.args.no_demo:
            fleet.start_fleet()
        fleet.watch()
    except Stop as stop:
        log.info("%s: stopping", stop)
    finally:
        fleet.stop()


if __name__ == "__main__":
    main()
