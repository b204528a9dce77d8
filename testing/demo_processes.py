"""Real processes of the demo fleet for tests: a dashboard on a fresh SQLite database set up
as `make run` sets it up (migrate, demo_setup --demo), and demo service instances."""

import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import httpx

from testing.processes import BASE_DIR, AsgiServer, Process, django_env, free_port

FLEET_USER, FLEET_PASSWORD = "demo-fleet", "graylane-fleet"


def fresh_env(var_dir: Path, **extra: str) -> dict[str, str]:
    """A graylane environment on its own SQLite file in `var_dir`, jobs in process."""
    return django_env(
        f"sqlite:///{var_dir / 'graylane.sqlite3'}",
        GRAYLANE_VAR_DIR=str(var_dir),
        IN_PROCESS_JOBS="true",
        REDIS_URL="",
        DEMO_FLEET_PASSWORD=FLEET_PASSWORD,
        **extra,
    )


def manage(var_dir: Path, *command: str) -> str:
    """`manage.py COMMAND` on the database of `var_dir`; its output."""
    return subprocess.run(
        [sys.executable, "manage.py", *command],
        cwd=BASE_DIR,
        env=fresh_env(var_dir),
        check=True,
        capture_output=True,
        text=True,
    ).stdout


@contextmanager
def fresh_dashboard(var_dir: Path):
    """uvicorn serving graylane.asgi on a database made by migrate + demo_setup --demo."""
    manage(var_dir, "migrate", "--noinput")
    manage(var_dir, "demo_setup", "--demo")
    with AsgiServer(fresh_env(var_dir)) as server:
        yield server


class DemoInstance(Process):
    """`python -m demo.service` on a free port; ready once it answers."""

    def __init__(self, registry_url: str, service: str, version: str, *extra: str, token: str = ""):
        """`token`: the fleet's API token, as `make run`'s fleet has it (the instance also
        reports its lifecycle and calls); without it, the fleet user's password."""
        self.service, self.version = service, version
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        args = [sys.executable, "-m", "demo.service", "--service", service]
        args += ["--version", version, "--port", str(self.port)]
        args += ["--registry", registry_url + "/nacos", *extra]
        if token:
            env = django_env("", REGISTRY_ACCESS_TOKEN=token)
        else:
            args += ["--username", FLEET_USER]
            env = django_env("", REGISTRY_PASSWORD=FLEET_PASSWORD)
        super().__init__(args, env)

    def is_ready(self) -> bool:
        try:
            return httpx.get(f"{self.url}/{self.service}/-/errors", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False
