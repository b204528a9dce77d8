"""The agent's command line. Options shared with the Python gateway have its names and
environment variables (docs/gateway.md); the command line wins over the environment."""

from __future__ import annotations

import argparse
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from dataplane.cli import env_option, gateway_options, positive
from dataplane.gateway.options import default_cache_file, sample_options

ENGINES = ("envoy", "nginx")


@dataclass(frozen=True)
class Options:
    engine: str
    dashboards: tuple[str, ...]
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
    # Sampled requests (sampling.py): the engine draws them, the agent caps them a second.
    samples: bool = True
    sample_rate: float = 0.1
    sample_cap: int = 200


def parse(argv: list[str] | None = None, environ=os.environ) -> Options:
    parser = argparse.ArgumentParser(
        prog="python -m dataplane.agent",
        description="The Graylane agent: runs Envoy or nginx as the gray gateway, configured "
        "from the dashboard's gateway documents (docs/agent.md).",
    )

    option = env_option(parser, environ)

    option("--engine", "GATEWAY_ENGINE", "the proxy to drive", required=True, choices=ENGINES)
    gateway_options(option, listen_help="HOST:PORT the engine serves on")
    option(
        "--admin-port",
        "AGENT_ADMIN_PORT",
        "loopback port of Envoy's admin interface (default: a free one Envoy picks, written to "
        "WORKDIR/admin.address)",
        type=int,
    )
    option(
        "--workdir",
        "AGENT_WORKDIR",
        "where the engine's configuration and logs are written (default: a new temporary "
        "directory)",
    )
    option("--binary", "AGENT_ENGINE_BINARY", "the engine's executable (default: found)")
    option(
        "--request-timeout",
        "GATEWAY_REQUEST_TIMEOUT",
        "seconds an instance has to answer",
        "30",
        type=positive,
    )
    option(
        "--reload-interval",
        "AGENT_RELOAD_INTERVAL",
        "nginx: least seconds between two reloads (changes in between are coalesced)",
        "1",
        type=positive,
    )
    option(
        "--worker-shutdown-timeout",
        "AGENT_WORKER_SHUTDOWN_TIMEOUT",
        "nginx: seconds an old worker may keep serving after a reload",
        "10",
        type=positive,
    )
    option(
        "--workers",
        "AGENT_WORKERS",
        "the engine's workers (Envoy threads, nginx processes); default: one per core",
        type=int,
    )
    sample_options(option)
    args = parser.parse_args(argv)
    host, port = args.listen
    workdir = (
        Path(args.workdir)
        if args.workdir
        else Path(tempfile.mkdtemp(prefix=f"graylane-{args.engine}-"))
    )
    return Options(
        engine=args.engine,
        dashboards=args.dashboard,
        token=args.token,
        host=host,
        port=port,
        admin_port=int(args.admin_port) if args.admin_port else 0,
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
        samples=args.samples,
        sample_rate=args.sample_rate,
        sample_cap=args.sample_cap,
    )
