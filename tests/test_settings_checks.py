"""`manage.py check` says when settings contradict each other (graylane/checks.py): each
check fires on the contradiction and stays quiet on the settings next to it."""

import re
import subprocess
import sys

import pytest
from django.core.checks import run_checks

from testing.processes import BASE_DIR, django_env

# A production-like server: PostgreSQL (`check` connects to none), Redis, 16 threads.
SERVER = {
    "DATABASE_URL": "postgres://graylane@127.0.0.1:5432/graylane",
    "REDIS_URL": "redis://127.0.0.1:6379/0",
    "WEB_THREADS": "16",
}


def graylane_ids() -> set[str]:
    return {message.id for message in run_checks() if message.id.startswith("graylane.")}


def checked(*unset: str, **env: str) -> tuple[int, set[str], str]:
    """`manage.py check` in a new process with this environment, less the variables named
    in `unset` (settings read anew): its exit code, the graylane check ids it reported, and
    its output."""
    environment = django_env(env.pop("DATABASE_URL", "sqlite:///:memory:"), **env)
    for name in unset:
        environment.pop(name, None)
    done = subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=BASE_DIR,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )
    output = done.stdout + done.stderr
    return done.returncode, set(re.findall(r"\((graylane\.[EW]\d{3})\)", output)), output


def test_the_test_settings_contradict_nothing():
    assert graylane_ids() == set()


def test_prometheus_as_the_source_needs_its_url(settings):
    settings.METRICS_SOURCE = "prometheus"
    settings.PROMETHEUS_URL = ""
    assert graylane_ids() == {"graylane.E001"}
    settings.PROMETHEUS_URL = "http://127.0.0.1:9090"
    assert graylane_ids() == set()
    settings.METRICS_SOURCE, settings.PROMETHEUS_URL = "rollups", ""
    assert graylane_ids() == set()


def test_in_process_jobs_asked_for_with_redis(settings):
    settings.REDIS_URL = "redis://127.0.0.1:6379/0"
    settings.IN_PROCESS_JOBS = True
    assert graylane_ids() == {"graylane.E002"}
    settings.IN_PROCESS_JOBS = False
    assert graylane_ids() == set()
    settings.REDIS_URL, settings.IN_PROCESS_JOBS = "", True
    assert graylane_ids() == set()


def test_a_metrics_body_limit_the_upload_limit_hides(settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1_000_000
    settings.METRICS_MAX_BODY_BYTES = 1_000_001
    assert graylane_ids() == {"graylane.W002"}
    settings.METRICS_MAX_BODY_BYTES = 1_000_000
    assert graylane_ids() == set()


@pytest.mark.parametrize("option", ["SECURE_HSTS_INCLUDE_SUBDOMAINS", "SECURE_HSTS_PRELOAD"])
def test_hsts_options_without_hsts(settings, option):
    setattr(settings, option, True)
    settings.SECURE_HSTS_SECONDS = 0
    assert graylane_ids() == {"graylane.W003"}
    settings.SECURE_HSTS_SECONDS = 3600
    assert graylane_ids() == set()


@pytest.mark.slow
def test_contradicting_environment_fails_the_check_naming_each():
    code, ids, output = checked(
        **SERVER,
        DB_POOL_SIZE="4",
        IN_PROCESS_JOBS="true",
        METRICS_SOURCE="prometheus",
        PROMETHEUS_URL="",
    )
    assert code == 1, output
    assert ids == {"graylane.E001", "graylane.E002", "graylane.W001"}
    assert "DB_POOL_SIZE=4 is below WEB_THREADS=16" in output
    assert "HINT: Set DB_POOL_SIZE to WEB_THREADS or more" in output


@pytest.mark.slow
def test_the_environment_next_to_them_passes():
    # IN_PROCESS_JOBS left unset: with REDIS_URL, its default is false (not a contradiction).
    code, ids, output = checked(
        "IN_PROCESS_JOBS",
        **SERVER,
        DB_POOL_SIZE="16",
        METRICS_SOURCE="prometheus",
        PROMETHEUS_URL="http://127.0.0.1:9090",
    )
    assert (code, ids) == (0, set()), output


@pytest.mark.slow
def test_sqlite_has_no_pool_to_be_too_small():
    code, ids, output = checked(DB_POOL_SIZE="4", WEB_THREADS="16")
    assert (code, ids) == (0, set()), output
