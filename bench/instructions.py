"""Instructions and last-level cache misses per call, counted by valgrind: a figure that does
not move with the machine's load or its neighbours (wall and CPU time do).

A script (run by the project's Python under callgrind) builds what it needs, then makes its
calls through `itertools.starmap`; callgrind counts only what runs beneath `starmap_next`
(--toggle-collect), so the set-up is left out. The same calls of a floor function (by
default one that does nothing) are counted too and taken off, leaving what the calls
themselves cost. Several functions are counted in one run under valgrind, a dump between
them (its set-up, under valgrind, is what takes long: minutes for 100,000 users).

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

# Runs `calls` (an iterable of argument tuples) through each function under the toggle, the
# floor first; os.getppid() between them makes callgrind dump what the last one cost
# (--dump-before=getppid), so one run under valgrind (its set-up is the slow part) counts all.
RUNNER = """
import collections, itertools, os, sys
sys.path.insert(0, {root!r})
{setup}
calls = list(calls)
# Uncounted (no starmap): the first pass over the calls takes the allocator's fresh memory.
for args in calls:
    ({floor})(*args)
for function in ({floor}, {functions}):
    os.getppid()
    collections.deque(itertools.starmap(function, calls), maxlen=0)
os.getppid()
"""
MARKER = "getppid"


@dataclass(frozen=True)
class Counted:
    instructions: float  # per call
    ll_misses: float  # per call: last-level misses, instruction and data, reads and writes


def available() -> str | None:
    """Why valgrind cannot count here (None: it can)."""
    if shutil.which("valgrind") is None:
        return "valgrind is not installed (Debian: apt-get install valgrind)"
    return None


def _count(script: str, environment: dict[str, str]) -> list[tuple[int, int]]:
    """(instructions, LL misses) of each part of the script between two markers."""
    with tempfile.TemporaryDirectory() as directory:
        out = Path(directory) / "callgrind.out"
        env = {**os.environ, "PYTHONHASHSEED": "0", **environment}
        subprocess.run(
            ["valgrind", "--tool=callgrind", "--toggle-collect=starmap_next", "--cache-sim=yes",
             f"--dump-before={MARKER}", *CACHES, f"--callgrind-out-file={out}", sys.executable,
             "-c", script],
            check=True, capture_output=True, env=env, cwd=ROOT,
        )  # fmt: skip
        parts = {}
        for dump in Path(directory).glob("callgrind.out.*"):
            text = dump.read_text(errors="replace")
            number = re.search(r"^part: (\d+)$", text, re.M)
            if number is not None:
                parts[int(number.group(1))] = totals(text)
    # Part 1 is everything before the first marker (nothing under the toggle); then one part
    # per function.
    counted = [parts[number] for number in sorted(parts)][1:]
    return [(t["Ir"], t["ILmr"] + t["DLmr"] + t["DLmw"]) for t in counted]


def totals(profile: str) -> dict[str, int]:
    events = re.search(r"^events: (.+)$", profile, re.M)
    summary = re.search(r"^(?:summary|totals): (.+)$", profile, re.M)
    if events is None or summary is None:
        raise RuntimeError("callgrind wrote no totals")
    values = [int(value) for value in summary.group(1).split()]
    return dict(zip(events.group(1).split(), values + [0] * len(events.group(1).split()),
                    strict=False))  # fmt: skip


def per_call(
    setup: str,
    functions: dict[str, str],
    count: int,
    floor: str = "lambda *args: None",
    environment: dict[str, str] | None = None,
) -> dict[str, Counted]:
    """What one call of each of `functions` (name -> expression) costs, over the `count`
    argument tuples that `setup` puts in `calls`, less what `floor` costs on the same
    calls (by default a function that does nothing: the call loop's own cost); the script
    run with `environment` added to this process's."""
    script = RUNNER.format(
        root=str(ROOT), setup=setup, floor=floor, functions=", ".join(functions.values())
    )
    (floor_ir, floor_ll), *measured = _count(script, environment or {})
    if len(measured) != len(functions):
        raise RuntimeError(f"callgrind dumped {len(measured)} parts for {len(functions)} calls")
    return {
        name: Counted(instructions=(ir - floor_ir) / count, ll_misses=(ll - floor_ll) / count)
        for name, (ir, ll) in zip(functions, measured, strict=True)
    }
