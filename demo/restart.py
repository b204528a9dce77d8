""" "Restart instance" for the demo fleet of `make run`: SIGTERM to the process of a demo
instance, as an operator's `kill PID` would do; the service SDK drains it losslessly and the
fleet starts it again, and the service page shows both on the lifecycle timeline.

Only with DEMO_RESTART on (the fleet turns it on for its dashboard), only for an instance on
this machine's loopback, and only to a process that /proc shows is `demo.service`
serving that very port: nothing the registry says (metadata, a PID) is trusted to pick what
to signal.
"""

from __future__ import annotations

import ipaddress
import os
import signal
from pathlib import Path

from django.conf import settings

from audit import log as audit_log
from registry_sync.models import Instance

DEMO_MODULE = b"demo.service"


class NotRestartable(Exception):
    """Why this instance cannot be restarted from the dashboard."""


def _on_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def demo_process(port: int, proc: Path = Path("/proc")) -> int | None:
    """The PID of the demo instance process serving `port`, or None."""
    wanted = str(port).encode()
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            args = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if DEMO_MODULE not in args:
            continue
        if any(a == b"--port" and b == wanted for a, b in zip(args, args[1:], strict=False)):
            return int(entry.name)
    return None


def restartable(row: Instance) -> bool:
    return settings.DEMO_RESTART and _on_loopback(row.host)


def restart_demo_instance(row: Instance, *, actor: str) -> int:
    """SIGTERM to the instance's demo process; its PID. NotRestartable says why not."""
    if not settings.DEMO_RESTART:
        raise NotRestartable("Restarting instances is for the demo fleet (DEMO_RESTART).")
    if not _on_loopback(row.host):
        raise NotRestartable(f"{row.host}:{row.port} is not on this machine.")
    pid = demo_process(row.port)
    if pid is None:
        raise NotRestartable(f"No demo instance process serves port {row.port} here.")
    os.kill(pid, signal.SIGTERM)
    audit_log.record(
        actor=actor,
        source="ui",
        action="instance.restart",
        object_label=f"instance {row.service.name} {row.host}:{row.port}",
        before={"pid": pid},
        after=None,
    )
    return pid
