"""Instructions and last-level cache misses per call, counted by valgrind: a figure that does
not move with the machine's load or its neighbours (wall and CPU time do).

A script (run by the project's Python under callgrind) builds what it needs, then makes its
calls through `itertools.starmap`; callgrind counts only what runs beneath `starmap_next`
(--toggle-collect), so the set-up is left out. The same calls of a function that does
nothing are counted too and taken off, leaving what the calls themselves cost.

The cache is simulated with a fixed geometry (an 8 MiB, 16-way last level: a common server
L3 share), not the host's, so the misses are the same on any machine of any size.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CACHES = ("--I1=32768,8,64", "--D1=32768,8,64", "--LL=8388608,16,64")

# Runs `calls` (an iterable of argument tuples) through `function` under the toggle; a
# function of the same arity that does nothing gives the floor to take off.
RUNNER = """
import collections, itertools, sys
sys.path.insert(0, {root!r})
{setup}
calls = list(calls)
function = (lambda *args: None) if {floor} else {function}
collections.deque(itertools.starmap(function, calls), maxlen=0)
"""


@dataclass(frozen=True)
class Counted:
    instructions: float  # per call
    ll_misses: float  # per call: last-level misses, instruction and data, reads and writes


def available() -> str | None:
    """Why valgrind cannot count here (None: it can)."""
    if shutil.which("valgrind") is None:
        return "valgrind is not installed (Debian: apt-get install valgrind)"
    return None


def _count(script: str) -> tuple[int, int]:
    with tempfile.TemporaryDirectory() as directory:
        out = Path(directory) / "callgrind.out"
        env = {**os.environ, "PYTHONHASHSEED": "0"}
        subprocess.run(
            ["valgrind", "--tool=callgrind", "--toggle-collect=starmap_next", "--cache-sim=yes",
             *CACHES, f"--callgrind-out-file={out}", sys.executable, "-c", script],
            check=True, capture_output=True, env=env, cwd=ROOT,
        )  # fmt: skip
        totals = _totals(out.read_text(errors="replace"))
    return totals["Ir"], totals["ILmr"] + totals["DLmr"] + totals["DLmw"]


def _totals(profile: str) -> dict[str, int]:
    events = re.search(r"^events: (.+)$", profile, re.M)
    summary = re.search(r"^(?:summary|totals): (.+)$", profile, re.M)
    if events is None or summary is None:
        raise RuntimeError("callgrind wrote no totals")
    values = [int(value) for value in summary.group(1).split()]
    return dict(zip(events.group(1).split(), values + [0] * len(events.group(1).split()),
                    strict=False))  # fmt: skip


def per_call(setup: str, function: str, count: int) -> Counted:
    """What one call of `function` costs, over the `count` argument tuples that `setup` puts
    in `calls`."""
    measured, floor = (
        _count(RUNNER.format(root=str(ROOT), setup=setup, function=function, floor=nothing))
        for nothing in (False, True)
    )
    return Counted(
        instructions=(measured[0] - floor[0]) / count,
        ll_misses=(measured[1] - floor[1]) / count,
    )
