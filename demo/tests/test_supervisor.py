"""The demo fleet's process handling (demo/supervisor.py, fleet.py), with real
processes: a stopped child takes what it forked along, a supervisor killed outright still
leaves nothing behind, and a port already in use stops the fleet before it starts anything."""

import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from demo.supervisor import Child
from testing.waiting import wait_until

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state != "Z"


def pid_in(pid_file: Path, writer: subprocess.Popen | None = None) -> int:
    def written() -> str:
        assert writer is None or writer.poll() is None, "the process writing it died"
        return pid_file.exists() and pid_file.read_text().strip()

    return int(wait_until(written, what=f"a pid in {pid_file.name}"))


def test_stopping_a_child_stops_what_it_forked(tmp_path):
    pid_file = tmp_path / "grandchild.pid"
    # A shell that forks a sleep and ignores SIGTERM itself: the group's SIGKILL ends both.
    script = f"trap '' TERM; sleep 60 & echo $! > {pid_file}; wait"
    child = Child("shell", ["sh", "-c", script]).start()
    grandchild = pid_in(pid_file)
    started = time.monotonic()
    child.stop(timeout=0.5)
    assert child.exited() is not None
    wait_until(lambda: not alive(grandchild), 5, "the grandchild to be gone")
    assert time.monotonic() - started < 5


def test_a_supervisor_killed_outright_leaves_no_child(tmp_path):
    pid_file = tmp_path / "child.pid"
    supervisor = textwrap.dedent(
        f"""
        import time
        from demo.supervisor import Child
        child = Child("sleeper", ["sleep", "60"]).start()
        open({str(pid_file)!r}, "w").write(str(child.pid))
        time.sleep(60)
        """
    )
    popen = subprocess.Popen([sys.executable, "-c", supervisor], cwd=REPO)
    try:
        child = pid_in(pid_file, popen)
        assert alive(child)
        os.kill(popen.pid, signal.SIGKILL)  # no chance to clean up
        popen.wait(5)
        # The kernel sent it SIGTERM (PR_SET_PDEATHSIG).
        wait_until(lambda: not alive(child), 5, "the child to be gone")
    finally:
        if popen.poll() is None:
            popen.kill()
            popen.wait()


def test_a_demo_port_in_use_stops_the_fleet_before_it_starts_anything():
    with socket.socket() as taken, socket.socket() as free:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        free.bind(("127.0.0.1", 0))
        dashboard_port = free.getsockname()[1]
        free.close()
        env = {**os.environ, "GATEWAY_PORT": str(taken.getsockname()[1])}
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "demo.fleet",
                "--listen",
                f"127.0.0.1:{dashboard_port}",
            ],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=30,
        )
    assert result.returncode != 0
    assert "the demo gateway (GATEWAY_PORT): cannot listen on 127.0.0.1:" in result.stderr
    assert "started" not in result.stderr
