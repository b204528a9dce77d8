"""Real processes for tests and benchmarks: uvicorn serving graylane.asgi (as `make run`), and
`celery -A graylane worker`, on a database and broker of the caller's choosing; a Redis and
a PostgreSQL of a test's own, which it may stop (never the machine's).

Each runs in its own session (process group), so stopping it also stops what it forked.
"""

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

from dataplane.agent.engines import stop_leftover

BASE_DIR = Path(__file__).resolve().parents[1]
# base64 of "graylane-TEST-ONLY-fernet-key-00", as in graylane/test_settings.py.
TEST_SECRET_KEYS = "Z3JheWxhbmUtVEVTVC1PTkxZLWZlcm5ldC1rZXktMDA="


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def database_url(settings_dict: dict) -> str:
    """A DATABASE_URL for Django's `connection.settings_dict` (e.g. the test database)."""
    if settings_dict["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{settings_dict['NAME']}"
    password = f":{settings_dict['PASSWORD']}" if settings_dict.get("PASSWORD") else ""
    host = settings_dict.get("HOST") or "127.0.0.1"
    port = settings_dict.get("PORT") or 5432
    return f"postgres://{settings_dict['USER']}{password}@{host}:{port}/{settings_dict['NAME']}"


def django_env(database: str, **extra: str) -> dict[str, str]:
    """Environment for a graylane process on `database`. REDIS_URL and REDIS_PREFIX are
    inherited; IN_PROCESS_JOBS is off unless `extra` turns it on."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("PYTEST_", "DJANGO_")) and key != "DATABASE_URL"
    }
    env.update(
        DJANGO_SETTINGS_MODULE="graylane.settings",
        DATABASE_URL=database,
        SECRET_KEY="test-only-secret-key-long-enough-for-django-checks-0123456789",
        # The caller's keys (the test settings'), so what either process stored, both read.
        GRAYLANE_SECRET_KEYS=os.environ.get("GRAYLANE_SECRET_KEYS", TEST_SECRET_KEYS),
        DEBUG="false",
        ALLOWED_HOSTS="127.0.0.1,localhost",
        IN_PROCESS_JOBS="false",
        GRAYLANE_VAR_DIR=str(Path(tempfile.gettempdir()) / "graylane-subprocesses"),
        LOG_LEVEL="WARNING",
    )
    env.update(extra)
    return env


class Process:
    """A child process in its own session, with its output in a log file; run as `user`
    when given (a server that refuses to run as root)."""

    ready_timeout = 30.0
    stop_signal = signal.SIGTERM

    def __init__(self, args: list[str], env: dict[str, str] | None, user: str | None = None):
        """`env`: the child's environment (None: this process's)."""
        self.args = args
        # Readiness is read from the log: a Python child must not hold its lines in a buffer
        # (an environment without PYTHONUNBUFFERED kept Celery beat's banner from it).
        self.env = {**(os.environ if env is None else env), "PYTHONUNBUFFERED": "1"}
        self.user = user
        self.log_path = Path(tempfile.mkstemp(prefix="graylane-", suffix=".log")[1])
        self.popen: subprocess.Popen | None = None
        self.final_log = ""  # the whole log, kept when the process is stopped

    def start(self):
        with open(self.log_path, "wb") as log:
            self.popen = subprocess.Popen(
                self.args,
                cwd=BASE_DIR,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                user=self.user,
            )
        deadline = time.monotonic() + self.ready_timeout
        while not self.is_ready():
            if self.popen.poll() is not None or time.monotonic() > deadline:
                output = self.log()
                self.stop()
                raise RuntimeError(f"{self.args[:4]} did not start:\n{output}")
            time.sleep(0.05)
        return self

    def is_ready(self) -> bool:
        raise NotImplementedError

    def log(self, tail: int = 4000) -> str:
        if not self.log_path.exists():
            return ""
        return self.log_path.read_text(errors="replace")[-tail:]

    def kill(self) -> None:
        """SIGKILL the process and everything it forked, without any chance to clean up."""
        if self.popen is not None and self.popen.poll() is None:
            os.killpg(self.popen.pid, signal.SIGKILL)
            self.popen.wait(5)

    def stop(self) -> None:
        if self.popen is not None and self.popen.poll() is None:
            os.killpg(self.popen.pid, self.stop_signal)
            try:
                self.popen.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()
        self.final_log = self.log(tail=10_000_000)
        self.log_path.unlink(missing_ok=True)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()


class AsgiServer(Process):
    def __init__(self, env: dict[str, str]):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        args = [sys.executable, "-m", "uvicorn", "--host", "127.0.0.1", "--port", str(self.port)]
        args += ["--lifespan", "off", "--no-access-log", "--timeout-graceful-shutdown", "3"]
        super().__init__([*args, "graylane.asgi:application"], env)

    def is_ready(self) -> bool:
        try:
            return httpx.get(self.url + "/healthz", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    @property
    def pid(self) -> int:
        assert self.popen is not None, "not started"
        return self.popen.pid

    def threads(self) -> int:
        """How many threads the server process runs now."""
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("Threads:"):
                return int(line.split()[1])
        raise RuntimeError("no Threads line in /proc status")


class CeleryWorker(Process):
    def __init__(
        self,
        env: dict[str, str],
        *,
        pool: str = "threads",
        concurrency: int = 4,
        beat: bool = False,
    ):
        args = [sys.executable, "-m", "celery", "-A", "graylane", "worker", "--loglevel=INFO"]
        args += [f"--pool={pool}", f"--concurrency={concurrency}"]
        if beat:
            schedule = Path(env.get("GRAYLANE_VAR_DIR", tempfile.gettempdir())) / "beat-schedule"
            args += ["--beat", "--schedule", str(schedule)]
        args += ["--without-heartbeat", "--without-mingle", "--without-gossip"]
        super().__init__(args, {**env, "LOG_LEVEL": "INFO"})  # INFO: "ready." is how we know

    def is_ready(self) -> bool:
        return " ready." in self.log()


class CeleryBeat(Process):
    """`celery beat` on its own, as production runs it (docs/deploy.md): it only queues the
    periodic jobs, which the workers run."""

    def __init__(self, env: dict[str, str]):
        schedule = Path(env.get("GRAYLANE_VAR_DIR", tempfile.gettempdir())) / "beat-schedule"
        args = [sys.executable, "-m", "celery", "-A", "graylane", "beat", "--loglevel=INFO"]
        args += ["--schedule", str(schedule)]
        super().__init__(args, {**env, "LOG_LEVEL": "INFO"})

    def is_ready(self) -> bool:
        # Its banner: the project's logging keeps celery's own INFO lines out of the log.
        return "is starting." in self.log()


class GatewayProcess(Process):
    """`python -m dataplane.gateway` against a dashboard, on a free loopback port (or `port`,
    to restart one where it was); ready once it routes by some configuration (/-/readyz).
    `extra`: more options."""

    ready_timeout = 15.0

    def __init__(self, dashboard: str, token: str, cache_file: Path, *extra: str, port: int = 0):
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        args = [sys.executable, "-m", "dataplane.gateway", "--dashboard", dashboard]
        args += ["--token", token, "--listen", f"127.0.0.1:{self.port}"]
        args += ["--cache-file", str(cache_file), *extra]
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "DJANGO_"))}
        super().__init__(args, {**env, "GATEWAY_LOG_LEVEL": "INFO"})

    def is_ready(self) -> bool:
        try:
            return httpx.get(self.url + "/-/readyz", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    def generation(self) -> int | None:
        """The generation it routes by (None before it has one)."""
        response = httpx.get(self.url + "/-/readyz", timeout=2)
        return int(response.text.split()[1]) if response.status_code == 200 else None


class AgentProcess(GatewayProcess):
    """`python -m dataplane.agent --engine <engine>` against a dashboard: the engine serves
    on the port (its /-/readyz says the generation in force), its files in `workdir`."""

    ready_timeout = 30.0

    def __init__(
        self, engine: str, dashboard: str, token: str, cache_file: Path, *extra: str, port=0
    ):
        workdir = cache_file.with_suffix(".engine")
        super().__init__(dashboard, token, cache_file, *extra, port=port)
        self.args[1:3] = ["-m", "dataplane.agent"]
        self.args += ["--engine", engine, "--workdir", str(workdir)]
        self.workdir = workdir

    def stop(self) -> None:
        """The agent, then its engine if the agent could not stop it (it runs in a session of
        its own, which the agent's process group does not reach)."""
        super().stop()
        stop_leftover(self.workdir)


PROMETHEUS = "/usr/bin/prometheus"


class PrometheusProcess(Process):
    """The real Prometheus (Debian's /usr/bin/prometheus) on a free loopback port, its data in
    `directory`, scraping `targets` (host:port) at `metrics_path` every second."""

    def __init__(self, directory: Path, targets: list[str], metrics_path: str = "/metrics"):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = directory / "prometheus.yml"
        config.write_text(
            "global: {scrape_interval: 1s, scrape_timeout: 1s, evaluation_interval: 1s}\n"
            "scrape_configs:\n"
            "  - job_name: graylane-gateway\n"
            f"    metrics_path: {metrics_path}\n"
            f"    static_configs: [{{targets: {targets!r}}}]\n"
        )
        args = [PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={directory / 'data'}"]
        args += [f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=warn"]
        super().__init__(args, {"PATH": os.environ.get("PATH", "/usr/bin:/bin")})

    def is_ready(self) -> bool:
        try:
            return httpx.get(self.url + "/-/ready", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    def scraped(self) -> bool:
        """Whether every target has been scraped, and the last scrape of each succeeded."""
        targets = httpx.get(self.url + "/api/v1/targets", timeout=2).json()["data"]
        active = targets["activeTargets"]
        return bool(active) and all(t["health"] == "up" for t in active)


class RedisServer(Process):
    """A Redis of the test's own on a free loopback port (or `port`, to restart one where it
    was), keeping nothing on disk: a test may stop it, unlike the machine's."""

    ready_timeout = 10.0

    def __init__(self, port: int = 0):
        self.port = port or free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        args = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1"]
        args += ["--save", "", "--appendonly", "no"]
        super().__init__(args, {"PATH": os.environ.get("PATH", "/usr/bin:/bin")})

    def is_ready(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as sock:
                sock.sendall(b"PING\r\n")
                return sock.recv(16).startswith(b"+PONG")
        except OSError:
            return False


POSTGRES_BIN = Path("/usr/lib/postgresql/15/bin")


class PostgresServer(Process):
    """A PostgreSQL of the test's own: a cluster made by initdb in `directory` (trust
    auth), served on a free loopback port (or `port`, to restart it where it was). Stopped
    as an operator stops it, with a fast shutdown (SIGINT): sessions are ended, and what
    they had not committed is rolled back. initdb and postgres refuse to run as root, so as
    root they run as the `postgres` user."""

    stop_signal = signal.SIGINT

    def __init__(self, directory: Path, port: int = 0):
        self.directory = directory
        self.port = port or free_port()
        user = "postgres" if os.geteuid() == 0 else None
        data = directory / "data"
        if not data.exists():
            if user:
                shutil.chown(directory, user, user)
            initdb = [str(POSTGRES_BIN / "initdb"), "-D", str(data), "-A", "trust"]
            initdb += ["-U", "postgres", "-E", "UTF8", "--locale=C", "--no-sync"]
            subprocess.run(initdb, check=True, capture_output=True, user=user)
        args = [str(POSTGRES_BIN / "postgres"), "-D", str(data), "-p", str(self.port)]
        args += ["-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories="]
        args += ["-c", "fsync=off", "-c", "max_connections=200"]
        super().__init__(args, {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}, user=user)

    def url(self, database: str = "postgres") -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{database}"

    def is_ready(self) -> bool:
        import psycopg

        try:
            psycopg.connect(self.url(), connect_timeout=1).close()
        except psycopg.OperationalError:
            return False
        return True

    def create_database(self, name: str) -> str:
        import psycopg

        with psycopg.connect(self.url(), autocommit=True) as connection:
            connection.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)


NEGOTIATE_SSL, NEGOTIATE_GSS = (80877103).to_bytes(4, "big"), (80877104).to_bytes(4, "big")


class CommitAnswerDropper:
    """A TCP proxy on a free loopback port in front of PostgreSQL that, once `arm()`ed,
    lets the next COMMIT through and cuts the client off before the answer: the transaction
    commits and the client cannot know it (as when the server goes away at that instant).
    It reads the PostgreSQL wire protocol (startup, then typed messages) from the client
    side to find a simple-query COMMIT."""

    def __init__(self, port: int):
        self.upstream = port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.armed = threading.Event()
        self.dropped = threading.Event()
        self._sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def url(self, database: str) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{database}"

    def arm(self) -> None:
        self.dropped.clear()
        self.armed.set()

    def close(self) -> None:
        self.listener.close()
        for sock in self._sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(("127.0.0.1", self.upstream))
            self._sockets += [client, server]
            cut = threading.Event()
            threading.Thread(
                target=self._to_server, args=(client, server, cut), daemon=True
            ).start()
            threading.Thread(
                target=self._to_client, args=(server, client, cut), daemon=True
            ).start()

    def _to_server(self, client: socket.socket, server: socket.socket, cut: threading.Event):
        reader = client.makefile("rb")
        try:
            while True:  # untyped: SSL and GSSAPI requests (answered "no"), then the startup
                length = int.from_bytes(reader.read(4), "big")
                body = reader.read(length - 4)
                server.sendall(length.to_bytes(4, "big") + body)
                if body[:4] not in (NEGOTIATE_SSL, NEGOTIATE_GSS):
                    break
            while True:
                kind = reader.read(1)
                length = int.from_bytes(reader.read(4), "big")
                body = reader.read(length - 4)
                if not kind:
                    return
                if kind == b"Q" and body.upper().startswith(b"COMMIT") and self.armed.is_set():
                    self.armed.clear()
                    cut.set()
                server.sendall(kind + length.to_bytes(4, "big") + body)
        except (OSError, ValueError):
            return

    def _to_client(self, server: socket.socket, client: socket.socket, cut: threading.Event):
        try:
            while data := server.recv(65536):
                if cut.is_set():  # the answer to the COMMIT: never delivered
                    for sock in (client, server):  # (shutdown: the reader holds `client` open)
                        sock.shutdown(socket.SHUT_RDWR)
                        sock.close()
                    self.dropped.set()
                    return
                client.sendall(data)
        except OSError:
            return
