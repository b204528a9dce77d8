"""The gateway's command line. Every option can also come from an environment variable
(named in --help); the command line wins."""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from pathlib import Path

from routing_engine import parse_networks


@dataclass(frozen=True)
class Options:
    dashboard: str
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


def _listen(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) < 65536:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {value!r}")
    return host.strip("[]") or "0.0.0.0", int(port)


def _networks(value: str) -> str:
    try:
        parse_networks(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc
    return value


def _positive(value: str) -> float:
    number = float(value)
    if not number > 0:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {value!r}")
    return number


def _boolean(value: str) -> bool:
    lowered = value.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {value!r}")


def default_cache_file(port: int) -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "graylane" / f"gateway-{port}.json"


def parse(argv: list[str] | None = None, environ=os.environ) -> Options:
    parser = argparse.ArgumentParser(
        prog="python -m dataplane.gateway",
        description="The Graylane gray gateway: routes /{service}/{path} by the dashboard's "
        "gray policy (docs/gateway.md).",
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

    option("--dashboard", "GATEWAY_DASHBOARD", "the dashboard's base URL", required=True)
    option(
        "--token",
        "GATEWAY_TOKEN",
        "this gateway's token (given when it was created)",
        required=True,
    )
    option("--listen", "GATEWAY_LISTEN", "HOST:PORT to serve on", "127.0.0.1:8080", type=_listen)
    option(
        "--name",
        "GATEWAY_NAME",
        "this gateway's name, for its acks and metrics; "
        "default: the name the dashboard returns with the first poll",
    )
    option(
        "--cache-file",
        "GATEWAY_CACHE_FILE",
        "where the last good configuration is kept across restarts "
        "(default: $XDG_CACHE_HOME/graylane/gateway-<port>.json)",
    )
    option(
        "--geoip",
        "GEOIP_DATABASE",
        "a GeoIP2/GeoLite2 City database (.mmdb) for callers' "
        "cities; without one only loopback and private addresses have a city (local)",
    )
    option(
        "--trusted-proxies",
        "TRUSTED_PROXIES",
        "comma-separated CIDRs of proxies whose X-Forwarded-For and city header are believed",
        "",
        type=_networks,
    )
    option(
        "--metrics-interval",
        "GATEWAY_METRICS_INTERVAL",
        "seconds between metric reports to the dashboard",
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
        "seconds an instance has to start answering (then 504)",
        "30",
        type=_positive,
    )
    option(
        "--idle-timeout",
        "GATEWAY_IDLE_TIMEOUT",
        "seconds a client connection may stay idle or send its request head",
        "60",
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
        "--upstream-idle-timeout",
        "GATEWAY_UPSTREAM_IDLE_TIMEOUT",
        "seconds a kept-alive instance connection may stay idle (keep it below the "
        "instances' own keep-alive timeout; uvicorn's is 5)",
        "4",
        type=_positive,
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
        type=_positive,
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
    # argparse passes string defaults (here: from the environment) through `type` too.
    host, port = args.listen

    return Options(
        dashboard=args.dashboard.rstrip("/"),
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
    )
