"""Child processes that stop with their parent: each in its own session (process group), so
a terminal's Ctrl-C reaches only the supervisor, which then stops them in its own order;
stopping one stops whatever it forked; and, on Linux, each is sent SIGTERM by the kernel if
the supervisor dies without cleaning up (PR_SET_PDEATHSIG), so none is left behind."""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence

log = logging.getLogger(__name__)

_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


class Child:
    """One supervised process: `name` for messages, its output goes to ours."""

    def __init__(self, name: str, args: Sequence[str], env: Mapping[str, str] | None = None):
        self.name = name
        self.args = list(args)
        self.env = dict(env) if env is not None else None
        self.popen: subprocess.Popen | None = None

    def start(self) -> Child:
        self.popen = subprocess.Popen(
            self.args, env=self.env, start_new_session=True, preexec_fn=_die_with_parent
        )
        return self

    @property
    def pid(self) -> int | None:
        return self.popen.pid if self.popen else None

    def exited(self) -> int | None:
        """Its exit code once it has ended, else None."""
        return self.popen.poll() if self.popen else None

    def signal_group(self, signum: int) -> None:
        if self.popen is None:
            return
        with contextlib.suppress(ProcessLookupError):  # the group is gone already
            os.killpg(self.popen.pid, signum)

    def stop(self, timeout: float) -> None:
        """SIGTERM to its group; SIGKILL after `timeout` s. Reaps it, and always sends the
        group a last SIGKILL so a grandchild that outlived its parent goes too."""
        if self.popen is None:
            return
        if self.popen.poll() is None:
            self.signal_group(signal.SIGTERM)
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                log.warning("%s did not stop within %.0f s: killed", self.name, timeout)
        self.signal_group(signal.SIGKILL)
        self.popen.wait()
