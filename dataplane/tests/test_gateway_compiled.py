"""The gateway's request path compiled by mypyc (dataplane/gateway/compiled.py): used where it
was built from exactly this source, never an older build beside newer source, and the pure
Python fallback passes the gateway's own tests too."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dataplane import gateway
from dataplane.gateway import compiled
from testing.processes import free_port

TESTS = Path(__file__).resolve().parent


def _copy_sources(root: Path) -> None:
    for directory in compiled.SOURCE_DIRECTORIES:
        (root / directory).mkdir(parents=True)
        for source in (compiled.ROOT / directory).glob("*.py"):
            shutil.copy(source, root / directory / source.name)


def test_a_build_is_used_only_while_every_source_it_read_is_unchanged(tmp_path, monkeypatch):
    monkeypatch.delenv(compiled.PURE_ENVIRONMENT, raising=False)
    root, build = tmp_path / "src", tmp_path / "build"
    _copy_sources(root)
    assert compiled.why_not_compiled(build, root) == "not built here (make install builds it)"

    build.mkdir()
    (build / compiled.MANIFEST).write_text(json.dumps(compiled.fingerprint(root)))
    assert compiled.why_not_compiled(build, root) is None

    # The engine's source counts too: the compiled path relies on its types.
    engine = root / "routing_engine" / "records.py"
    engine.write_text(engine.read_text() + "\n# edited\n")
    assert compiled.why_not_compiled(build, root) == (
        "built from other sources (routing_engine/records.py changed; make install)"
    )
    assert compiled.changed_since_build(build, root) == ["routing_engine/records.py"]


def test_the_environment_asks_for_the_python_source(monkeypatch):
    monkeypatch.setenv(compiled.PURE_ENVIRONMENT, "true")
    assert compiled.why_not_compiled() == f"{compiled.PURE_ENVIRONMENT} is set"


def test_the_compiled_path_is_what_runs_where_it_is_built():
    """CI builds it (make install) and sets REQUIRE_SPEEDUPS: the suite then runs the
    compiled gateway, and the test below the Python one."""
    if gateway.NOT_COMPILED is not None:
        reason = f"the gateway runs as Python here: {gateway.NOT_COMPILED}"
        if os.environ.get("REQUIRE_SPEEDUPS") == "true":
            pytest.fail(f"{reason}, and REQUIRE_SPEEDUPS=true: both must be tested.")
        pytest.skip(reason)
    assert compiled.in_use()
    from dataplane.gateway import proxy, upstream

    assert Path(proxy.__file__).is_relative_to(compiled.BUILD)
    assert Path(upstream.__file__).suffix == ".so"


@pytest.mark.slow
def test_the_gateway_s_tests_pass_on_the_python_source():
    """The fallback, where nothing is compiled, runs the same tests in a process of its own."""
    here = Path(__file__).name
    tests = sorted(str(path) for path in TESTS.glob("test_gateway_*.py") if path.name != here)
    environment = {**os.environ, compiled.PURE_ENVIRONMENT: "true"}
    probe = subprocess.run(
        [sys.executable, "-c", "from dataplane.gateway import compiled; print(compiled.in_use())"],
        cwd=compiled.ROOT, env=environment, capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert probe.stdout.strip() == "False"
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests],
        cwd=compiled.ROOT, env=environment, capture_output=True, text=True,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]


def _listening_line(tmp_path: Path, environment: dict[str, str]) -> str:
    """What a started gateway logs once it listens (its dashboard is not there: it serves
    no configuration, but it starts and says how it runs)."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "dataplane.gateway", "--dashboard", f"http://127.0.0.1:{free_port()}",
         "--token", "t", "--name", "compiled-test", "--listen", f"127.0.0.1:{port}",
         "--cache-file", str(tmp_path / "cache.json")],
        cwd=compiled.ROOT, env={**environment, "GATEWAY_LOG_LEVEL": "INFO"},
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert process.stderr is not None
        for line in process.stderr:
            if "Gateway listening" in line:
                return line
        raise AssertionError(f"the gateway exited ({process.wait()}) without listening")
    finally:
        process.terminate()
        process.wait(timeout=10)


@pytest.mark.slow
def test_a_started_gateway_says_which_request_path_it_runs(tmp_path):
    if gateway.NOT_COMPILED is None:
        assert "request path compiled by mypyc" in _listening_line(tmp_path, dict(os.environ))
    python = _listening_line(tmp_path, {**os.environ, compiled.PURE_ENVIRONMENT: "true"})
    assert f"request path as Python: {compiled.PURE_ENVIRONMENT} is set" in python
