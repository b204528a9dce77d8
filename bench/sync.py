"""Registry sync: our bulk `sync_registry` against a per-row `update_or_create` loop.

    .venv/bin/python bench/sync.py [--quick] [--repeat N] [--database-url URL]
                                   [--latency-ms MS] [--verbose]

A loopback registry (FakeNacos, the contract fake, 2.x shape; run in its own process, as a
real registry would be, so it does not share our GIL) serves 2,000 services x 5 instances
(metadata version V1, one V2 canary per service). Each repetition, on emptied tables, each
side runs three syncs: a full sync from empty, a sync with nothing changed, and a sync after
the registry swapped V1 and V2 on every instance (all 10,000 rows change).

  ours      sync_registry(registry), as the beat job calls it;
  baseline  the same read_registry() fetch through the same adapter, then per service
            Service.objects.get_or_create and per instance Instance.objects.update_or_create
            (same fields, same state mapping), in one transaction (generous to the baseline:
            one commit, not one per row).

Fetch (HTTP to the registry) is timed apart from write (database), since both sides pay
the same fetch. Ours also runs its after-commit hooks (routable_instances_changed
receivers, e.g. the gateway document bump, and the websocket event); they are timed apart
and counted in ours' total only. Writes are counted on the connection itself
(execute_wrapper): every INSERT/UPDATE/DELETE statement (for executemany, each parameter
set) and the rows it touched, per table. The table contents are also compared before and
after the no-change sync (ids and last_seen included), and ours against the baseline's.

--latency-ms makes the registry wait before each answer, as a network would: read_registry
then reads the instance lists in threads (it measures both ways on its first lists; the
printout says how often threads won). --verbose prints every sample's write time.

Database: a throwaway SQLite file by default; with --database-url postgres://.../NAME the
database NAME (must contain "bench") is created, and dropped at the end, with psycopg.
Latest figures: bench/README.md.
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
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.measure import (  # noqa: E402
    BENCH_SECRET_KEYS,
    create_bench_database,
    drop_bench_database,
)

SERVICES, QUICK_SERVICES, INSTANCES_PER_SERVICE = 2000, 200, 5
WRITE_SQL = re.compile(r'\s*(INSERT\s+INTO|UPDATE|DELETE\s+FROM)\s+"?(\w+)"?', re.IGNORECASE)
INSERT_COLUMNS = re.compile(r'INSERT\s+INTO\s+"?\w+"?\s*\(([^)]*)\)', re.IGNORECASE)
TABLES = {"registry_sync_instance": "instance", "registry_sync_service": "service"}
REGISTRY_TABLE = "registry_sync_registry"


# -- the registry, in its own process --------------------------------------------------------


def serve_registry(services: int, latency_ms: float) -> None:
    """Child process: FakeNacos 2.x with the data set; print its URL, serve until stdin
    closes. A line "flip" on stdin swaps V1 and V2 in every instance's metadata."""
    from testing.fakes.nacos_fake import FakeNacos

    fake = FakeNacos(version="2.x")
    fake.delay(latency_ms / 1000)
    for s in range(services):
        name = f"svc-{s:04d}"
        for i in range(INSTANCES_PER_SERVICE):
            version = "V2" if i == INSTANCES_PER_SERVICE - 1 else "V1"
            host = f"10.{s // 250}.{s % 250}.{i + 1}"
            fake.add_instance(name, host, 8080, metadata={"version": version})
    fake.start()
    print(fake.url, flush=True)
    for line in sys.stdin:
        if line.strip() == "flip":
            with fake.lock:
                for instances in fake.services.values():
                    for record in instances.values():
                        old = record.metadata["version"]
                        record.metadata["version"] = "V2" if old == "V1" else "V1"
            print("flipped", flush=True)
    fake.stop()


def start_registry(services: int, latency_ms: float) -> tuple[subprocess.Popen, str]:
    process = subprocess.Popen(
        [
            sys.executable,
            __file__,
            "--serve-registry",
            str(services),
            "--latency-ms",
            str(latency_ms),
        ],
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


def flip_versions(process: subprocess.Popen) -> None:
    process.stdin.write("flip\n")
    process.stdin.flush()
    assert process.stdout.readline().strip() == "flipped"


def stop_registry(process: subprocess.Popen) -> None:
    process.stdin.close()
    try:
        process.wait(10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


# -- the throwaway database ------------------------------------------------------------------


def setup_django(database_url: str, var_dir: str) -> None:
    os.environ["DATABASE_URL"] = database_url
    os.environ["DJANGO_SETTINGS_MODULE"] = "graylane.settings"
    os.environ["GRAYLANE_VAR_DIR"] = var_dir
    os.environ["DEBUG"] = "false"  # DEBUG would keep every query in memory
    os.environ["IN_PROCESS_JOBS"] = "false"
    os.environ["LOG_LEVEL"] = "ERROR"  # the hooks log each bump as a warning
    os.environ.setdefault("SECRET_KEY", "bench-only-secret-key-long-enough-for-django-checks-0123")
    os.environ.setdefault("GRAYLANE_SECRET_KEYS", BENCH_SECRET_KEYS)
    os.environ.pop("REDIS_URL", None)  # in-memory channel layer: no network in the timing
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0, interactive=False)


# -- counting writes ---------------------------------------------------------------------------


class WriteCounter:
    """execute_wrapper: INSERT/UPDATE/DELETE statements and the rows they touched, per table.

    Rows: the cursor's rowcount (for executemany, the sum over the parameter sets), except
    for an INSERT ... RETURNING on SQLite, whose rowcount is not known before Django fetches
    the returned ids: there, the parameter count divided by the statement's column count."""

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
            self.rows[table] += self._rows(sql, params, many, context)
        return result

    @staticmethod
    def _rows(sql, params, many, context) -> int:
        columns = INSERT_COLUMNS.match(sql)
        if columns and context["connection"].vendor == "sqlite" and "RETURNING" in sql.upper():
            assert not many
            return len(params) // len(columns.group(1).split(","))
        return max(context["cursor"].rowcount, 0)

    def snapshot(self) -> dict[str, tuple[int, int]]:
        return {t: (self.statements[t], self.rows[t]) for t in self.statements}


# -- the two contenders ------------------------------------------------------------------------


class Timed:
    """Wraps a function of registry_sync.sync (looked up there at call time), timing it."""

    def __init__(self, func):
        self.func, self.seconds, self.calls = func, 0.0, 0

    def __call__(self, *args, **kwargs):
        self.calls += 1
        started = time.perf_counter()
        try:
            return self.func(*args, **kwargs)
        finally:
            self.seconds += time.perf_counter() - started


class ChoiceCounter:
    """Wraps registry_sync.sync._read_concurrently: counts the reads (either side) that chose
    threads for the lists after the two probes (the first 2 x PROBE_SERVICES services)."""

    def __init__(self, func):
        from registry_sync.sync import PROBE_SERVICES

        self.func, self.calls, self.rest = func, 0, f"svc-{2 * PROBE_SERVICES:04d}"

    def __call__(self, adapter, names, *args, **kwargs):
        self.calls += names[0] == self.rest
        return self.func(adapter, names, *args, **kwargs)


@dataclass
class Sample:
    fetch: float
    write: float
    hooks: float = 0.0
    summary: object = None

    @property
    def total(self) -> float:
        return self.fetch + self.write + self.hooks


class Ours:
    """sync_registry() as the beat job calls it. The fetch (adapter_for: the HTTP client;
    read_registry: the requests) and the hooks run after commit (_announce) are timed by
    wrapping them where sync_registry looks them up; write is the rest."""

    label = "ours"

    def __init__(self):
        from registry_sync import sync

        self.sync = sync
        self.connect = sync.adapter_for = Timed(sync.adapter_for)
        self.read = sync.read_registry = Timed(sync.read_registry)
        self.announce = sync._announce = Timed(sync._announce)
        self.threaded = sync._read_concurrently = ChoiceCounter(sync._read_concurrently)

    def __call__(self, registry) -> Sample:
        self.connect.seconds = self.read.seconds = self.announce.seconds = 0.0
        started = time.perf_counter()
        summary = self.sync.sync_registry(registry)
        total = time.perf_counter() - started
        fetch, hooks = self.connect.seconds + self.read.seconds, self.announce.seconds
        return Sample(fetch, total - fetch - hooks, hooks, summary)


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


class Baseline:
    """The same fetch (read_registry through the same adapter), then one get_or_create per
    service and one update_or_create per instance, all in one transaction."""

    label = "update_or_create"

    def __call__(self, registry) -> Sample:
        from registry_sync.registries import adapter_for
        from registry_sync.sync import read_registry

        started = time.perf_counter()
        adapter = adapter_for(registry)
        try:
            snapshot = read_registry(adapter)
            fetched = time.perf_counter()
            baseline_write(registry, snapshot)
            return Sample(fetched - started, time.perf_counter() - fetched)
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


def hook_receivers() -> str:
    from registry_sync.models import Instance
    from registry_sync.signals import routable_instances_changed

    try:  # private API, for the printout only
        sync_receivers, async_receivers = routable_instances_changed._live_receivers(Instance)
        names = [f"{r.__module__}.{r.__qualname__}" for r in [*sync_receivers, *async_receivers]]
    except Exception:
        names = [f"{len(routable_instances_changed.receivers)} receiver(s)"]
    return ", ".join(names) or "none"


SCENARIOS = {
    "full": "full sync from empty",
    "again": "sync, nothing changed",
    "changed": "sync, every instance changed (version V1<->V2)",
}


def run_side(side, registry, registry_process, instances, services, counter, samples, writes):
    """One side's three syncs on emptied tables; returns the table contents after the full and
    the all-changed sync, for comparing the two sides."""
    empty_tables()
    counter.reset()
    full = side(registry)
    writes[(side.label, "full")] = counter.snapshot()
    if full.summary is not None:
        assert (full.summary.added, full.summary.services_added) == (instances, services)
    after_full = table_contents(with_ids=False)

    before = table_contents(with_ids=True)
    counter.reset()
    again = side(registry)
    writes[(side.label, "again")] = counter.snapshot()
    if again.summary is not None:
        assert again.summary.unchanged == instances and again.summary.rows_written == 0
        assert table_contents(with_ids=True) == before, "the no-change sync changed rows"

    flip_versions(registry_process)
    counter.reset()
    changed = side(registry)
    writes[(side.label, "changed")] = counter.snapshot()
    if changed.summary is not None:
        assert changed.summary.changed == instances, changed.summary
    after_changed = table_contents(with_ids=False)
    flip_versions(registry_process)  # back, untimed

    for scenario, sample in (("full", full), ("again", again), ("changed", changed)):
        samples.setdefault((side.label, scenario), []).append(sample)
    return after_full, after_changed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_SERVICES} services")
    parser.add_argument("--repeat", type=int, default=3, help="repetitions (medians)")
    parser.add_argument(
        "--database-url", help="e.g. postgres://postgres@127.0.0.1:5432/graylane_bench"
    )
    parser.add_argument(
        "--latency-ms",
        type=float,
        default=0.0,
        help="the registry waits this long before each answer (a network in between)",
    )
    parser.add_argument("--verbose", action="store_true", help="every sample's write time")
    parser.add_argument("--serve-registry", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_registry:
        serve_registry(args.serve_registry, args.latency_ms)
        return
    services = QUICK_SERVICES if args.quick else SERVICES

    var_dir = tempfile.TemporaryDirectory(prefix="graylane-bench-sync-")
    database_url = args.database_url or f"sqlite:///{var_dir.name}/bench.sqlite3"
    postgres = database_url.startswith(("postgres://", "postgresql://"))
    if postgres:
        create_bench_database(database_url)
    registry_process, registry_url = start_registry(services, args.latency_ms)
    try:
        started = time.perf_counter()
        setup_django(database_url, var_dir.name)
        measure(args, services, registry_process, registry_url, time.perf_counter() - started)
    finally:
        stop_registry(registry_process)
        if postgres:
            from django.db import connections

            connections.close_all()
            drop_bench_database(database_url)
        var_dir.cleanup()


def measure(args, services, registry_process, registry_url, setup_seconds) -> None:
    from django.db import connection

    from registry_sync.models import Registry
    from registry_sync.sync import READ_WORKERS

    instances = services * INSTANCES_PER_SERVICE
    db = connection.settings_dict
    if connection.vendor == "sqlite":
        where = "SQLite (temporary file)"
    else:
        where = (
            f"PostgreSQL {connection.pg_version // 10000} ({db['HOST']}:{db['PORT']}/{db['NAME']})"
        )
    print(f"database: {where}; setup + migrate {setup_seconds:.1f} s")
    print(
        f"registry: FakeNacos 2.x at {registry_url} (own process), {services:,} services × "
        f"{INSTANCES_PER_SERVICE} instances = {instances:,}; repeat {args.repeat}"
        + (f"; {args.latency_ms:g} ms before each answer" if args.latency_ms else "")
    )
    print(f"ours' after-commit hooks: _announce -> {hook_receivers()}; websocket event")
    registry = Registry.objects.create(name="bench", kind="nacos", base_url=registry_url)
    ours, base = Ours(), Baseline()
    counter = WriteCounter()
    samples: dict[tuple[str, str], list[Sample]] = {}
    writes: dict[tuple[str, str], dict[str, tuple[int, int]]] = {}
    with connection.execute_wrapper(counter):
        # One untimed round first: the first syncs of a process pay one-time costs (query
        # compilation, caches, the hooks' first document) that would fall on one side.
        for side in (ours, base):
            run_side(side, registry, registry_process, instances, services, counter, {}, {})
        for rep in range(args.repeat):
            order = (ours, base) if rep % 2 == 0 else (base, ours)
            contents = {
                side.label: run_side(
                    side, registry, registry_process, instances, services, counter, samples, writes
                )
                for side in order
            }
            assert contents[ours.label] == contents[base.label], "ours and the baseline disagree"

    def med(label, scenario, part):
        return statistics.median(getattr(s, part) for s in samples[(label, scenario)])

    if args.verbose:
        for (label, scenario), values in sorted(samples.items()):
            print(f"  {label} {scenario}: write " + ", ".join(f"{v.write:.3f}" for v in values))
    print()
    print(f"{'median of ' + str(args.repeat):<32}{'ours':>10}{'update_or_create':>20}{'ratio':>9}")
    for scenario, title in SCENARIOS.items():
        print(title)
        for part, name in (("fetch", "fetch (HTTP)"), ("write", "write (database)"),
                           ("hooks", "after-commit hooks"), ("total", "total")):  # fmt: skip
            o, b = med("ours", scenario, part), med(base.label, scenario, part)
            ratio = f"{b / o:>8.1f}×" if part in ("fetch", "write", "total") else ""
            shown_b = f"{b:>19.3f}s" if part != "hooks" else f"{'-':>20}"
            print(f"  {name:<30}{o:>9.3f}s{shown_b}{ratio}")

    print()
    print(f"{'writes: statements / rows':<32}{'ours':>16}{'update_or_create':>22}")
    for scenario in SCENARIOS:
        for table, short in TABLES.items():
            o_st, o_rows = writes[("ours", scenario)].get(table, (0, 0))
            b_st, b_rows = writes[(base.label, scenario)].get(table, (0, 0))
            print(
                f"  {scenario + ': ' + short:<30}"
                f"{f'{o_st:,} / {o_rows:,}':>16}{f'{b_st:,} / {b_rows:,}':>22}"
            )
    for scenario in SCENARIOS:
        other = {
            t: v
            for t, v in writes[("ours", scenario)].items()
            if t not in TABLES and t != REGISTRY_TABLE
        }
        if other:
            print(f"  {scenario}: other tables (from the after-commit hooks): {other}")
    st, rows = writes[("ours", "again")].get(REGISTRY_TABLE, (0, 0))
    print(
        f"  plus, ours only, per sync: {st} UPDATE of {rows} {REGISTRY_TABLE} row (the "
        "registry's own bookkeeping: stale=False, last_error, last_sync_at, last_success_at)"
    )

    reads = 2 * len(SCENARIOS) * (args.repeat + 1)
    print(
        f"  fetch: {ours.threaded.calls} of {reads} reads (both sides, warm-up included) "
        f"found {READ_WORKERS} threads faster than one on their first lists and used them"
    )
    full_total, base_total = med("ours", "full", "total"), med(base.label, "full", "total")
    full_write, base_write = med("ours", "full", "write"), med(base.label, "full", "write")
    again_rows = sum(writes[("ours", "again")].get(t, (0, 0))[1] for t in TABLES)
    again_instance_rows = writes[("ours", "again")].get("registry_sync_instance", (0, 0))[1]
    print()
    print(
        f"targets: full sync ≤ 2 s: {'met' if full_total <= 2 else 'MISSED'} "
        f"({full_total:.2f} s); no-change sync writes 0 instance/service rows: "
        f"{'met' if again_rows == 0 else 'MISSED'} ({again_rows}); "
        f"≥ 10× update_or_create on the write: "
        f"{'met' if base_write / full_write >= 10 else 'MISSED'} ({base_write / full_write:.1f}×)"
    )
    print(
        f"full sync {instances:,} instances: ours {full_total:.2f} s vs update_or_create "
        f"{base_total:.2f} s ({base_total / full_total:.1f}× end to end, same fetch; "
        f"write {full_write:.2f} s vs {base_write:.2f} s, {base_write / full_write:.1f}×); "
        f"no-change sync wrote {again_instance_rows} instance rows"
    )


if __name__ == "__main__":
    main()
