"""System checks for settings that contradict each other: `manage.py check` reports them,
and so does every command that runs the checks first (`migrate`, so `make run` too). Each
says which settings, what follows, and what to change. Registered by graylane.apps."""

from collections.abc import Sequence
from typing import Any

from django.apps import AppConfig
from django.conf import settings
from django.core.checks import CheckMessage, Error, Warning, register


@register()
def metrics_source_has_prometheus(
    app_configs: Sequence[AppConfig] | None, **kwargs: Any
) -> list[CheckMessage]:
    if settings.METRICS_SOURCE != "prometheus" or settings.PROMETHEUS_URL:
        return []
    return [
        Error(
            "METRICS_SOURCE=prometheus needs PROMETHEUS_URL: the series API reads Prometheus "
            "by default, and there is none to ask (every request without source=rollups "
            "answers 400, the history of the pages' charts too).",
            hint="Set PROMETHEUS_URL (e.g. http://127.0.0.1:9090), or METRICS_SOURCE=rollups.",
            id="graylane.E001",
        )
    ]


@register()
def in_process_jobs_without_redis(
    app_configs: Sequence[AppConfig] | None, **kwargs: Any
) -> list[CheckMessage]:
    if not (settings.IN_PROCESS_JOBS and settings.REDIS_URL):
        return []
    return [
        Error(
            "IN_PROCESS_JOBS=true with REDIS_URL: with Redis, the web process runs no jobs "
            "(syncs, deliveries, the live figures), whatever IN_PROCESS_JOBS says.",
            hint="Run `celery -A graylane worker -B` beside the web process and drop "
            "IN_PROCESS_JOBS; or unset REDIS_URL for everything in one process.",
            id="graylane.E002",
        )
    ]


@register()
def database_pool_serves_the_threads(
    app_configs: Sequence[AppConfig] | None, **kwargs: Any
) -> list[CheckMessage]:
    pool = settings.DATABASES["default"].get("OPTIONS", {}).get("pool")
    if not isinstance(pool, dict) or pool["max_size"] >= settings.WEB_THREADS:
        return []
    return [
        Warning(
            f"DB_POOL_SIZE={pool['max_size']} is below WEB_THREADS={settings.WEB_THREADS}: "
            "under load, requests wait for a connection (at most "
            f"{pool['timeout']} s, then fail), and jobs and gateway calls share the pool.",
            hint="Set DB_POOL_SIZE to WEB_THREADS or more (within PostgreSQL's "
            "max_connections, across all processes), or lower WEB_THREADS.",
            id="graylane.W001",
        )
    ]


@register()
def metrics_body_limit_is_reachable(
    app_configs: Sequence[AppConfig] | None, **kwargs: Any
) -> list[CheckMessage]:
    if settings.METRICS_MAX_BODY_BYTES <= settings.DATA_UPLOAD_MAX_MEMORY_SIZE:
        return []
    return [
        Warning(
            f"METRICS_MAX_BODY_BYTES={settings.METRICS_MAX_BODY_BYTES} is above "
            f"DATA_UPLOAD_MAX_MEMORY_SIZE={settings.DATA_UPLOAD_MAX_MEMORY_SIZE}: every "
            "request body over the latter is refused (413) before the metrics endpoint "
            "sees it, so the metrics limit is never the one that answers.",
            hint="Raise DATA_UPLOAD_MAX_MEMORY_SIZE with it, or lower METRICS_MAX_BODY_BYTES.",
            id="graylane.W002",
        )
    ]


@register()
def hsts_options_have_hsts(
    app_configs: Sequence[AppConfig] | None, **kwargs: Any
) -> list[CheckMessage]:
    asked = [
        name
        for name in ("SECURE_HSTS_INCLUDE_SUBDOMAINS", "SECURE_HSTS_PRELOAD")
        if getattr(settings, name)
    ]
    if not asked or settings.SECURE_HSTS_SECONDS:
        return []
    return [
        Warning(
            f"{' and '.join(asked)} set, but SECURE_HSTS_SECONDS is 0: no answer carries "
            "an HSTS header for them to add to.",
            hint="Set SECURE_HSTS_SECONDS (e.g. 31536000) once https works for good, or "
            f"drop {' and '.join(asked)}.",
            id="graylane.W003",
        )
    ]
