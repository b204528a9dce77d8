"""The gateway's command line. Every option can also come from an environment variable
(named in --help); the command line wins."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from dataplane.cli import boolean, env_option, gateway_options, positive


def share(value: str) -> float:
    number = float(value)
    if not 0 <= number <= 1:
        raise argparse.ArgumentTypeError(f"expected a number from 0 to 1, got {value!r}")
    return number


def count(value: str) -> int:
    number = int(value)
    if number < 0:
        raise argparse.ArgumentTypeError(f"expected a whole number from 0, got {value!r}")
    return number


@dataclass(frozen=True)
class Options:
    dashboards: tuple[str, ...]
    token: str
    host: str
    port: int
    name: str | None
    cache_file: Path
    geoip: str | None
    trusted_proxies: str
    metrics_interval: float
    poll_wait: float
    request_timeout: float
    idle_timeout: float
    connect_timeout: float
    upstream_idle_timeout: float
    eject_after: int
    eject_seconds: float
    prod_fallback: bool
    log_level: str
    # Sampled requests for the dashboard (sampling.py): off, or this share, at most cap/s.
    samples: bool = True
    sample_rate: float = 0.1
    sample_cap: int = 200


def default_cache_file(port: int) -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "graylane" / f"gateway-{port}.json"


def sample_options(option: Callable[..., None]) -> None:
    """Sampled requests (sampling.py): the Python gateway's and the agent's alike."""
    option(
        "--samples",
        "GATEWAY_SAMPLES",
        "send sampled requests (the attributes rules read, status, latency) to the dashboard",
        "true",
        type=boolean,
    )
    option(
        "--sample-rate",
        "GATEWAY_SAMPLE_RATE",
        "the share of requests sampled, from 0 to 1",
        "0.1",
        type=share,
    )
    option(
        "--sample-cap",
        "GATEWAY_SAMPLE_CAP",
        "most requests sampled per second",
        "200",
        type=count,
    )


def parse(argv: list[str] | None = None, environ=os.environ) -> Options:
    parser = argparse.ArgumentParser(
        prog="python -m dataplane.gateway",
        description="The Graylane gray gateway: routes /{service}/{path} by the dashboard's "
        "gray policy (docs/gateway.md).",
    )

    option = env_option(parser, environ)
    gateway_options(option, listen_help="HOST:PORT to serve on")
    option(
        "--request-timeout",
        "GATEWAY_REQUEST_TIMEOUT",
        "seconds an instance has to start answering (then 504)",
        "30",
        type=positive,
    )
    option(
        "--idle-timeout",
        "GATEWAY_IDLE_TIMEOUT",
        "seconds a client connection may stay idle or send its request head",
        "60",
        type=positive,
    )
    option(
        "--upstream-idle-timeout",
        "GATEWAY_UPSTREAM_IDLE_TIMEOUT",
        "seconds a kept-alive instance connection may stay idle (keep it below the "
        "instances' own keep-alive timeout; uvicorn's is 5)",
        "4",
        type=positive,
    )
    option(
        "--eject-after",
        "GATEWAY_EJECT_AFTER",
        "failed connects in a row that eject an instance",
        "3",
        type=int,
    )
    option(
        "--eject-seconds",
        "GATEWAY_EJECT_SECONDS",
        "how long an ejected instance is skipped",
        "10",
        type=positive,
    )
    sample_options(option)
    args = parser.parse_args(argv)
    # argparse passes string defaults (here: from the environment) through `type` too.
    host, port = args.listen

    return Options(
        dashboards=args.dashboard,
        token=args.token,
        host=host,
        port=port,
        name=args.name or None,
        cache_file=Path(args.cache_file) if args.cache_file else default_cache_file(port),
        geoip=args.geoip or None,
        trusted_proxies=args.trusted_proxies,
        metrics_interval=args.metrics_interval,
        poll_wait=min(60.0, args.poll_wait),
        request_timeout=args.request_timeout,
        idle_timeout=args.idle_timeout,
        connect_timeout=args.connect_timeout,
        upstream_idle_timeout=args.upstream_idle_timeout,
        eject_after=max(1, args.eject_after),
        eject_seconds=args.eject_seconds,
        prod_fallback=args.prod_fallback,
        log_level=args.log_level.upper(),
        samples=args.samples,
        sample_rate=args.sample_rate,
        sample_cap=args.sample_cap,
    )
