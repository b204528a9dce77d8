"""The agent's command line. Options shared with the Python gateway have its names and
environment variables (docs/gateway.md); the command line wins over the environment."""

from __future__ import annotations

import argparse
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from dataplane.gateway.options import _boolean, _listen, _networks, _positive, default_cache_file

ENGINES = ("envoy", "nginx")


@dataclass(frozen=True)
class Options:
    engine: str
    dashboard: str
    token: str
    host: str
    port: int
    admin_port: int
    name: str | None
    cache_file: Path
    workdir: Path
    binary: str | None
    geoip: str | None
    trusted_proxies: str
    metrics_interval: float
    poll_wait: float
    request_timeout: float
    connect_timeout: float
    reload_interval: float
    worker_shutdown_timeout: float
    workers: int | None
    prod_fallback: bool
    log_level: str


def parse(argv: list[str] | None = None, environ=os.environ) -> Options:
    parser = argparse.ArgumentParser(
        prog="python -m dataplane.agent",
        description="The Graylane agent: runs Envoy or nginx as the gray gateway, configured "
        "from the dashboard's gateway documents (docs/agent.md).",
    )

    def option(flag, env, help, default=None, required=False, **kwargs):
        value = environ.get(env, default)
        parser.add_argument(
            flag,
            default=value,
            required=required and value is None,
            help=f"{help} [env {env}" + (f", default {default}]" if default is not None else "]"),
            **kwargs,
        )

    option("--engine", "GATEWAY_ENGINE", "the proxy to drive", required=True, choices=ENGINES)
    option("--dashboard", "GATEWAY_DASHBOARD", "the dashboard's base URL", required=True)
    option("--token", "GATEWAY_TOKEN", "this gateway's token", required=True)
    option(
        "--listen",
        "GATEWAY_LISTEN",
        "HOST:PORT the engine serves on",
        "127.0.0.1:8080",
        type=_listen,
    )
    option(
        "--admin-port",
        "AGENT_ADMIN_PORT",
        "loopback port of Envoy's admin interface (default: the listen port + 1)",
        type=int,
    )
    option("--name", "GATEWAY_NAME", "this gateway's name (default: from the first poll)")
    option(
        "--cache-file",
        "GATEWAY_CACHE_FILE",
        "the last good document (default: $XDG_CACHE_HOME/graylane/gateway-<port>.json)",
    )
    option(
        "--workdir",
        "AGENT_WORKDIR",
        "where the engine's configuration and logs are written (default: a new temporary "
        "directory)",
    )
    option("--binary", "AGENT_ENGINE_BINARY", "the engine's executable (default: found)")
    option("--geoip", "GEOIP_DATABASE", "a GeoIP2/GeoLite2 City database (.mmdb)")
    option(
        "--trusted-proxies",
        "TRUSTED_PROXIES",
        "comma-separated CIDRs whose X-Forwarded-For and city header are believed",
        "",
        type=_networks,
    )
    option(
        "--metrics-interval",
        "GATEWAY_METRICS_INTERVAL",
        "seconds between metric reports",
        "1",
        type=_positive,
    )
    option(
        "--poll-wait",
        "GATEWAY_POLL_WAIT",
        "seconds each long poll waits (at most 60)",
        "30",
        type=_positive,
    )
    option(
        "--request-timeout",
        "GATEWAY_REQUEST_TIMEOUT",
        "seconds an instance has to answer",
        "30",
        type=_positive,
    )
    option(
        "--connect-timeout",
        "GATEWAY_CONNECT_TIMEOUT",
        "seconds to connect to an instance",
        "2",
        type=_positive,
    )
    option(
        "--reload-interval",
        "AGENT_RELOAD_INTERVAL",
        "nginx: least seconds between two reloads (changes in between are coalesced)",
        "1",
        type=_positive,
    )
    option(
        "--worker-shutdown-timeout",
        "AGENT_WORKER_SHUTDOWN_TIMEOUT",
        "nginx: seconds an old worker may keep serving after a reload",
        "10",
        type=_positive,
    )
    option(
        "--workers",
        "AGENT_WORKERS",
        "the engine's workers (Envoy threads, nginx processes); default: one per core",
        type=int,
    )
    option(
        "--prod-fallback",
        "GATEWAY_PROD_FALLBACK",
        "send GRAY requests to prod when a service has no gray instance",
        "true",
        type=_boolean,
    )
    option("--log-level", "GATEWAY_LOG_LEVEL", "logging level", "INFO")
    args = parser.parse_args(argv)
    host, port = args.listen
    workdir = (
        Path(args.workdir)
        if args.workdir
        else Path(tempfile.mkdtemp(prefix=f"graylane-{args.engine}-"))
    )
    return Options(
        engine=args.engine,
        dashboard=args.dashboard.rstrip("/"),
        token=args.token,
        host=host,
        port=port,
        admin_port=int(args.admin_port) if args.admin_port else port + 1,
        name=args.name or None,
        cache_file=Path(args.cache_file) if args.cache_file else default_cache_file(port),
        workdir=workdir.resolve(),
        binary=args.binary or None,
        geoip=args.geoip or None,
        trusted_proxies=args.trusted_proxies,
        metrics_interval=args.metrics_interval,
        poll_wait=min(60.0, args.poll_wait),
        request_timeout=args.request_timeout,
        connect_timeout=args.connect_timeout,
        reload_interval=args.reload_interval,
        worker_shutdown_timeout=args.worker_shutdown_timeout,
        workers=int(args.workers) if args.workers else None,
        prod_fallback=args.prod_fallback,
        log_level=args.log_level.upper(),
    )
