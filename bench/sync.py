"""Registry sync: our bulk `sync_registry` against a per-row `update_or_create` loop.

    .venv/bin/python bench/sync.py [--quick] [--repeat N] [--database-url URL]

A loopback registry (FakeNacos, the contract fake, 2.x shape; run in its own process, as a
real registry would be, so it does not share our GIL) serves 2,000 services x 5 instances
(metadata version V1, one V2 canary per service). Each repetition, on emptied tables:

  ours      sync_registry(): a full sync from empty, then a sync with nothing changed;
  baseline  the same read_registry() fetch, then per service Service.objects.get_or_create
            and per instance Instance.objects.update_or_create(...), in one transaction
            (generous to the baseline: one commit, not one per row); full, then no change.

Fetch (HTTP to the registry) is timed apart from write (database), since both sides pay
the same fetch. Writes are counted on the connection itself (execute_wrapper): every
INSERT/UPDATE/DELETE statement and the rows it touched, per table. The table contents are
also compared before/after the no-change sync, and ours against the baseline's.

Database: a throwaway SQLite file by default; with --database-url postgres://.../NAME the
database NAME (must contain "bench") is created, and dropped at the end, with psycopg.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SERVICES, QUICK_SERVICES, INSTANCES_PER_SERVICE = 2000, 200, 5
WRITE_SQL = re.compile(r'\s*(INSERT\s+INTO|UPDATE|DELETE\s+FROM)\s+"?(\w+)"?', re.IGNORECASE)
INSERT_COLUMNS = re.compile(r'INSERT\s+INTO\s+"?\w+"?\s*\(([^)]*)\)', re.IGNORECASE)
TABLES = {"registry_sync_instance": "instance", "registry_sync_service": "service"}
REGISTRY_TABLE = "registry_sync_registry"


# -- the registry, in its own process --------------------------------------------------------


def serve_registry(services: int) -> None:
    """Child process: FakeNacos 2.x with the data set; print its URL, serve until stdin closes."""
    from registry_sync.fakes.nacos_fake import FakeNacos

    fake = FakeNacos(version="2.x")
    for s in range(services):
        name = f"svc-{s:04d}"
        for i in range(INSTANCES_PER_SERVICE):
            version = "V2" if i == INSTANCES_PER_SERVICE - 1 else "V1"
            host = f"10.{s // 250}.{s % 250}.{i + 1}"
            fake.add_instance(name, host, 8080, metadata={"version": version})
    fake.start()
    print(fake.url, flush=True)
    sys.stdin.read()
    fake.stop()


def start_registry(services: int) -> tuple[subprocess.Popen, str]:
    process = subprocess.Popen(
        [sys.executable, __file__, "--serve-registry", str(services)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        start_new_session=True,
    )
    url = process.stdout.readline().strip()
    if not url.startswith("http://127.0.0.1:"):
        process.kill()
        raise SystemExit(f"the registry did not start (got {url!r})")
    return process, url


def stop_registry(process: subprocess.Popen) -> None:
    process.stdin.close()
    try:
        process.wait(10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


# -- the throwaway database ------------------------------------------------------------------


def _admin_url(url: str) -> tuple[str, str]:
    parts = urlsplit(url)
    name = parts.path.lstrip("/")
    if not name or "bench" not in name:
        raise SystemExit(f"refusing to create/drop {name!r}: the database name must contain 'bench'")
    return urlunsplit(parts._replace(scheme="postgresql", path="/postgres")), name


def create_pg_database(url: str) -> None:
    import psycopg
    from psycopg import sql

    admin, name = _admin_url(url)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))


def drop_pg_database(url: str) -> None:
    import psycopg
    from psycopg import sql

    admin, name = _admin_url(url)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def setup_django(database_url: str, var_dir: str) -> None:
    os.environ["DATABASE_URL"] = database_url
    os.environ["DJANGO_SETTINGS_MODULE"] = "graylane.settings"
    os.environ["GRAYLANE_VAR_DIR"] = var_dir
    os.environ["DEBUG"] = "false"  # DEBUG would keep every query in memory
    os.environ["IN_PROCESS_JOBS"] = "false"
    os.environ["LOG_LEVEL"] = "WARNING"
    os.environ.setdefault("SECRET_KEY", "bench-only-secret-key")
    os.environ.pop("REDIS_URL", None)  # in-memory channel layer: no network in the timing
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0, interactive=False)


# -- counting writes ---------------------------------------------------------------------------


class WriteCounter:
    """execute_wrapper: INSERT/UPDATE/DELETE statements and the rows they touched, per table.

    Rows: the cursor's rowcount, except for an INSERT ... RETURNING (bulk_create), whose
    rowcount is not known before Django fetches the returned ids on SQLite; there the rows
    are the parameter count divided by the column count of the statement."""

    def __init__(self):
        self.statements: Counter[str] = Counter()
        self.rows: Counter[str] = Counter()

    def reset(self) -> None:
        self.statements.clear()
        self.rows.clear()

    def __call__(self, execute, sql, params, many, context):
        result = execute(sql, params, many, context)
        match = WRITE_SQL.match(sql)
        if match:
            table = match.group(2)
            self.statements[table] += len(params) if many else 1
            self.rows[table] += self._rows(sql, params, many, context["cursor"])
        return result

    @staticmethod
    def _rows(sql, params, many, cursor) -> int:
        columns = INSERT_COLUMNS.match(sql)
        if columns and "RETURNING" in sql.upper():
            width = len(columns.group(1).split(","))
            count = sum(len(p) for p in params) if many else len(params or ())
            return count // width
        return max(cursor.rowcount, 0)

    def snapshot(self) -> dict[str, tuple[int, int]]:
        return {t: (self.statements[t], self.rows[t]) for t in self.statements}


# -- the two contenders ------------------------------------------------------------------------


class TimedRead:
    """Wraps registry_sync.sync.read_registry to time the fetch inside sync_registry."""

    def __init__(self, read):
        self.read, self.seconds = read, 0.0

    def __call__(self, *args, **kwargs):
        started = time.perf_counter()
        try:
            return self.read(*args, **kwargs)
        finally:
            self.seconds = time.perf_counter() - started


def run_ours(registry, timed_read) -> tuple[float, float, object]:
    from registry_sync import sync

    started = time.perf_counter()
    summary = sync.sync_registry(registry)
    total = time.perf_counter() - started
    return timed_read.seconds, total - timed_read.seconds, summary


def baseline_write(registry, snapshot) -> None:
    from django.db import transaction
    from django.utils import timezone

    from registry_sync.models import Instance, Service
    from registry_sync.states import observed_state

    now = timezone.now()
    with transaction.atomic():
        for name, instances in snapshot.items():
            service, _ = Service.objects.get_or_create(name=name, defaults={"registry": registry})
            for seen in instances:
                Instance.objects.update_or_create(
                    service=service,
                    instance_id=seen.instance_id,
                    defaults={
                        "host": seen.host,
                        "port": seen.port,
                        "cluster": seen.cluster,
                        "version": str(seen.metadata.get("version", ""))[:64],
                        "state": observed_state(
                            seen, offline_intent=False, drain_until=None, now=now
                        ),
                        "healthy": seen.healthy,
                        "enabled": seen.enabled,
                        "weight": seen.weight,
                        "metadata": dict(seen.metadata),
                        "last_seen": now,
                    },
                )


def run_baseline(registry) -> tuple[float, float]:
    from registry_sync.registries import adapter_for
    from registry_sync.sync import read_registry

    adapter = adapter_for(registry)
    try:
        started = time.perf_counter()
        snapshot = read_registry(adapter)
        fetched = time.perf_counter()
        baseline_write(registry, snapshot)
        return fetched - started, time.perf_counter() - fetched
    finally:
        adapter.close()


# -- helpers -----------------------------------------------------------------------------------


def empty_tables() -> None:
    from django.db import connection

    from registry_sync.models import Registry

    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "TRUNCATE registry_sync_instance, registry_sync_service RESTART IDENTITY CASCADE"
            )
            cursor.execute("ANALYZE")
        else:
            cursor.execute("DELETE FROM registry_sync_instance")
            cursor.execute("DELETE FROM registry_sync_service")
    Registry.objects.update(stale=False, last_error="", last_sync_at=None, last_success_at=None)


def table_contents(with_ids: bool) -> list[tuple]:
    from registry_sync.models import Instance

    fields = ["service__name", "instance_id", "host", "port", "cluster", "version", "state",
              "healthy", "enabled", "weight", "metadata", "note", "offline_intent"]  # fmt: skip
    if with_ids:
        fields += ["pk", "service_id", "last_seen"]
    return sorted(Instance.objects.values_list(*fields))


def written(counts: dict[str, tuple[int, int]], table: str) -> tuple[int, int]:
    return counts.get(table, (0, 0))


def median(samples: list[float]) -> float:
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_SERVICES} services")
    parser.add_argument("--repeat", type=int, default=3, help="repetitions (medians)")
    parser.add_argument("--database-url", help="e.g. postgres://postgres@127.0.0.1:5432/graylane_bench")
    parser.add_argument("--serve-registry", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_registry:
        serve_registry(args.serve_registry)
        return
    services = QUICK_SERVICES if args.quick else SERVICES
    instances = services * INSTANCES_PER_SERVICE

    var_dir = tempfile.TemporaryDirectory(prefix="graylane-bench-sync-")
    database_url = args.database_url or f"sqlite:///{var_dir.name}/bench.sqlite3"
    if database_url.startswith(("postgres://", "postgresql://")):
        create_pg_database(database_url)
    registry_process, registry_url = start_registry(services)
    try:
        started = time.perf_counter()
        setup_django(database_url, var_dir.name)
        measure(args, services, instances, registry_url, time.perf_counter() - started)
    finally:
        stop_registry(registry_process)
        if database_url.startswith(("postgres://", "postgresql://")):
            from django.db import connections

            connections.close_all()
            drop_pg_database(database_url)
        var_dir.cleanup()


def measure(args, services, instances, registry_url, setup_seconds) -> None:
    from django.db import connection

    from registry_sync import sync
    from registry_sync.models import Registry, Service

    db = connection.settings_dict
    where = "SQLite (temporary file)" if connection.vendor == "sqlite" else (
        f"PostgreSQL {connection.pg_version // 10000} ({db['HOST']}:{db['PORT']}/{db['NAME']})"
    )
    print(f"database: {where}; setup + migrate {setup_seconds:.1f} s")
    print(
        f"registry: FakeNacos 2.x at {registry_url} (own process), {services:,} services × "
        f"{INSTANCES_PER_SERVICE} instances = {instances:,}; repeat {args.repeat}"
    )
    registry = Registry.objects.create(name="bench", kind="nacos", base_url=registry_url)
    timed_read = TimedRead(sync.read_registry)
    sync.read_registry = timed_read  # sync_registry looks it up at call time
    counter = WriteCounter()
    results: dict[str, list[float]] = {}
    writes: dict[str, dict[str, tuple[int, int]]] = {}

    def record(key, value):
        results.setdefault(key, []).append(value)

    with connection.execute_wrapper(counter):
        for _ in range(args.repeat):
            # ours: full sync from empty, then nothing changed
            empty_tables()
            counter.reset()
            fetch, write, summary = run_ours(registry, timed_read)
            assert (summary.added, summary.services_added) == (instances, services), summary
            record("ours full fetch", fetch)
            record("ours full write", write)
            writes["ours full"] = counter.snapshot()
            ours_rows = table_contents(with_ids=False)
            before = table_contents(with_ids=True)
            counter.reset()
            fetch, write, summary = run_ours(registry, timed_read)
            assert summary.unchanged == instances and summary.rows_written == 0, summary
            record("ours again fetch", fetch)
            record("ours again write", write)
            writes["ours again"] = counter.snapshot()
            assert table_contents(with_ids=True) == before, "the no-change sync changed rows"

            # baseline: same fetch, per-row update_or_create
            empty_tables()
            counter.reset()
            fetch, write = run_baseline(registry)
            record("base full fetch", fetch)
            record("base full write", write)
            writes["base full"] = counter.snapshot()
            assert table_contents(with_ids=False) == ours_rows, "baseline and ours disagree"
            counter.reset()
            fetch, write = run_baseline(registry)
            record("base again fetch", fetch)
            record("base again write", write)
            writes["base again"] = counter.snapshot()
    assert Service.objects.count() == services

    m = {key: median(values) for key, values in results.items()}
    for phase in ("full", "again"):
        for side in ("ours", "base"):
            m[f"{side} {phase} total"] = median(
                [f + w for f, w in zip(
                    results[f"{side} {phase} fetch"], results[f"{side} {phase} write"],
                    strict=True,
                )]
            )  # fmt: skip

    print()
    print(f"{'median of ' + str(args.repeat):<28}{'ours':>10}{'update_or_create':>20}{'ratio':>10}")
    for phase, label in (("full", "full sync from empty"), ("again", "sync, nothing changed")):
        print(label)
        for part in ("total", "fetch", "write"):
            ours, base = m[f"ours {phase} {part}"], m[f"base {phase} {part}"]
            print(f"  {part:<26}{ours:>9.3f}s{base:>19.3f}s{base / ours:>9.1f}×")
    print()
    print("rows written (statements / rows), per table:")
    for key, label in (("full", "full sync"), ("again", "nothing changed")):
        for table, short in TABLES.items():
            ours_st, ours_rows = written(writes[f"ours {key}"], table)
            base_st, base_rows = written(writes[f"base {key}"], table)
            print(
                f"  {label + ', ' + short:<26}"
                f"{f'{ours_st:,} / {ours_rows:,}':>16}{f'{base_st:,} / {base_rows:,}':>20}"
            )
    other = {
        t
        for counts in writes.values()
        for t in counts
        if t not in TABLES and t != REGISTRY_TABLE
    }
    assert not other, f"unexpected writes to {other}"
    st, rows = written(writes["ours again"], REGISTRY_TABLE)
    print(
        f"  bookkeeping (ours only): {st} UPDATE of {rows} {REGISTRY_TABLE} row per sync "
        "(stale=False, last_error, last_sync_at, last_success_at)"
    )
    ours_again_instance_rows = written(writes["ours again"], "registry_sync_instance")[1]
    ours_again_service_rows = written(writes["ours again"], "registry_sync_service")[1]
    print(
        f"target: full sync ≤ 2 s: {'met' if m['ours full total'] <= 2 else 'MISSED'}; "
        f"no-change writes 0 rows: "
        f"{'met' if ours_again_instance_rows + ours_again_service_rows == 0 else 'MISSED'}; "
        f"≥ 10× update_or_create (write): "
        f"{'met' if m['base full write'] / m['ours full write'] >= 10 else 'MISSED'}"
    )
    print(
        f"full sync {instances:,} instances: ours {m['ours full total']:.2f} s vs "
        f"update_or_create {m['base full total']:.2f} s "
        f"({m['base full total'] / m['ours full total']:.1f}× end to end, "
        f"{m['base full write'] / m['ours full write']:.0f}× on the write); "
        f"no-change sync wrote {ours_again_instance_rows} instance rows"
    )


if __name__ == "__main__":
    main()
