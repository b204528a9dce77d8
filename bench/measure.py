"""What the bench scripts share: percentiles, CPU time next to wall time, their PostgreSQL
databases (made and dropped only when their names say they are bench databases), and the
key their Graylane processes encrypt stored secrets with.

Nothing of the project, and only the standard library until a database is made or dropped
(psycopg): importing this never sets up Django.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

# base64 of "graylane-bench-only-fernet-key-0" (GRAYLANE_SECRET_KEYS: needed with DEBUG off).
BENCH_SECRET_KEYS = "Z3JheWxhbmUtYmVuY2gtb25seS1mZXJuZXQta2V5LTA="

# -- percentiles -------------------------------------------------------------------------------

PERCENTILE_METHOD = "linear interpolation between closest ranks (statistics.quantiles inclusive)"


def percentile(samples: Sequence[float], p: float) -> float:
    """The p-th percentile (0 <= p <= 100) by linear interpolation between the closest ranks:
    position h = (n - 1) * p / 100 in the sorted samples, interpolated between floor(h) and
    ceil(h). The same as statistics.quantiles(method="inclusive") and numpy's default, for
    any n >= 1 (p50 is the median; p0 the minimum, p100 the maximum)."""
    if not samples:
        raise ValueError("no samples")
    if not 0 <= p <= 100:
        raise ValueError(f"percentile {p} is not within 0..100")
    ordered = sorted(samples)
    h = (len(ordered) - 1) * p / 100
    low = math.floor(h)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (h - low) * (ordered[high] - ordered[low])


def tail_warning(samples: Sequence[float], p: float = 99) -> str | None:
    """Why the p-th percentile of these samples says less than it seems, or None: it equals
    the maximum, or it is interpolated toward the maximum (for p99: fewer than 101 samples)."""
    n = len(samples)
    h = (n - 1) * p / 100
    enough = math.floor(100 / (100 - p)) + 1 if p < 100 else math.inf
    advice = f"; take at least {enough} samples to keep the maximum out of it" if n < enough else ""
    if percentile(samples, p) == max(samples):
        return f"WARNING: p{p:g} of {n} samples IS the maximum{advice}"
    if h > n - 2:
        weight = h - (n - 2)
        return (
            f"{'WARNING' if weight >= 0.5 else 'note'}: p{p:g} of {n} samples is interpolated "
            f"between the two largest, {weight:.0%} of the way to the maximum{advice}"
        )
    return None


def summary(samples: Sequence[float], unit: str, digits: int = 1) -> str:
    """ "n=100: p50 12.3, p90 .., p99 .., max .. ms"."""
    figures = ", ".join(
        f"{name} {value:.{digits}f}"
        for name, value in (
            ("p50", percentile(samples, 50)),
            ("p90", percentile(samples, 90)),
            ("p99", percentile(samples, 99)),
            ("max", max(samples)),
        )
    )
    return f"n={len(samples)}: {figures} {unit}"


# -- CPU time ----------------------------------------------------------------------------------

_TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Clock:
    """Wall time and this process's CPU time (user + sys, all threads), read together."""

    wall: float
    cpu: float

    @classmethod
    def now(cls) -> Clock:
        return cls(time.perf_counter(), time.process_time())

    def since(self, start: Clock) -> Clock:
        return Clock(self.wall - start.wall, self.cpu - start.cpu)


def _stat_fields(pid: int | str) -> list[str]:
    """/proc/<pid>/stat from field 3 (state) on: the name in field 2 may hold spaces."""
    text = Path(f"/proc/{pid}/stat").read_text()
    return text[text.rindex(")") + 2 :].split()


def session_cpu_seconds(leader: int) -> float:
    """User + sys CPU seconds of every process in the session `leader` leads (a child started
    with start_new_session=True, and whatever it forked), including the children it has
    already waited for. Resolution: one clock tick (1/SC_CLK_TCK s). Linux /proc only."""
    total = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = _stat_fields(entry.name)
        except (FileNotFoundError, ProcessLookupError, ValueError):
            continue  # gone meanwhile
        # Fields (man 5 proc), counted from 3: session 6, utime 14, stime 15, cutime 16, cstime 17.
        if int(fields[6 - 3]) == leader:
            total += sum(int(fields[n - 3]) for n in (14, 15, 16, 17))
    return total / _TICKS


# -- bench databases ---------------------------------------------------------------------------


def bench_database_name(url: str) -> str:
    """The database name in a postgres:// URL, if it says it is a bench database (contains
    "bench"); otherwise SystemExit, before anything is dropped or created."""
    name = urlsplit(url).path.lstrip("/")
    if "bench" not in name.lower():
        raise SystemExit(
            f"refusing to drop and create database {name!r}: the bench drops the "
            "database it is given, so its name must contain 'bench' (e.g. graylane_bench)"
        )
    return name


def _admin_url(url: str) -> str:
    return urlunsplit(urlsplit(url)._replace(scheme="postgresql", path="/postgres"))


def drop_bench_database(url: str) -> None:
    """DROP DATABASE IF EXISTS ... WITH (FORCE) (PostgreSQL 13+), for a bench database only."""
    import psycopg
    from psycopg import sql

    name = bench_database_name(url)
    with psycopg.connect(_admin_url(url), autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )


def create_bench_database(url: str) -> None:
    """The bench database of `url`, dropped if it exists and created anew."""
    import psycopg
    from psycopg import sql

    drop_bench_database(url)
    with psycopg.connect(_admin_url(url), autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(bench_database_name(url))))
