"""The README's management commands, run as a newcomer runs them: in a new process with only
what the README's line sets in the environment, on the installation `make run` makes."""

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from testing.processes import BASE_DIR

pytestmark = pytest.mark.slow


def readme_command(starting: str) -> list[str]:
    """The README's command line starting with `starting`, its comment dropped."""
    readme = (BASE_DIR / "README.md").read_text()
    line = next(line for line in readme.splitlines() if line.startswith(starting))
    return shlex.split(line.split("#")[0])


def run(argv: list[str], var_dir: Path) -> subprocess.CompletedProcess:
    """`argv` (leading VAR=value words go to the environment) in a shell's bare environment,
    with the venv's python standing for `.venv/bin/python` and `var_dir` for the checkout's var/."""
    env = {"PATH": os.environ["PATH"], "HOME": str(var_dir), "GRAYLANE_VAR_DIR": str(var_dir)}
    while re.fullmatch(r"[A-Z_]+=.*", argv[0]):
        name, value = argv.pop(0).split("=", 1)
        env[name] = value
    assert argv[0] == ".venv/bin/python"
    return subprocess.run(
        [sys.executable, *argv[1:]], cwd=BASE_DIR, env=env, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip


def test_the_readmes_issue_token_line_prints_a_token_on_the_installation_make_run_made(tmp_path):
    migrated = run(["DEBUG=true", ".venv/bin/python", "manage.py", "migrate"], tmp_path)
    assert migrated.returncode == 0, migrated.stderr
    issued = run(
        readme_command("DEBUG=true .venv/bin/python manage.py issue_token robot"), tmp_path
    )
    assert issued.returncode == 0, issued.stderr
    assert re.fullmatch(r"[0-9a-f]{40}", issued.stdout.strip().splitlines()[-1])


def test_a_missing_production_setting_is_one_line_naming_it_not_a_traceback(tmp_path):
    done = run(
        [".venv/bin/python", "manage.py", "issue_token", "robot", "--role", "operator"], tmp_path
    )
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert done.stderr.startswith("manage.py: SECRET_KEY must be set when DEBUG is off")
    assert len(done.stderr.strip().splitlines()) == 1
