"""What the data plane's commands (the gateway, the agent) share on their command lines: the
value types of their options, and options that may also come from an environment variable
(named in --help; the command line wins)."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from typing import Any

from dataplane.dashboards import dashboard_urls
from routing_engine import parse_networks


def env_option(parser: argparse.ArgumentParser, environ: Mapping[str, str]) -> Callable[..., None]:
    """`option(flag, env, help, default=None, required=False, **argparse_kwargs)` for `parser`:
    the environment variable `env` stands in for a flag that is not given."""

    def option(flag: str, env: str, help: str, default: Any = None, required=False, **kwargs):
        value = environ.get(env, default)
        parser.add_argument(
            flag,
            default=value,
            required=required and value is None,
            help=f"{help} [env {env}" + (f", default {default}]" if default is not None else "]"),
            **kwargs,
        )

    return option


def urls(value: str) -> tuple[str, ...]:
    try:
        return dashboard_urls(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def listen(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) < 65536:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {value!r}")
    return host.strip("[]") or "0.0.0.0", int(port)


def networks(value: str) -> str:
    try:
        parse_networks(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc
    return value


def positive(value: str) -> float:
    number = float(value)
    if not number > 0:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {value!r}")
    return number


def boolean(value: str) -> bool:
    lowered = value.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {value!r}")


def gateway_options(option: Callable[..., None], listen_help: str) -> None:
    """The options every gateway has, the Python gateway and the agent alike: how it reaches
    the dashboard, where it serves, its cache file, who its callers are, and its reports."""
    option(
        "--dashboard",
        "GATEWAY_DASHBOARD",
        "the dashboard's base URL; several (its replicas), comma-separated, are tried in "
        "turn when one cannot be reached or answers 5xx",
        required=True,
        type=urls,
    )
    option(
        "--token",
        "GATEWAY_TOKEN",
        "this gateway's token (given when it was created)",
        required=True,
    )
    option("--listen", "GATEWAY_LISTEN", listen_help, "127.0.0.1:8080", type=listen)
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
        type=networks,
    )
    option(
        "--metrics-interval",
        "GATEWAY_METRICS_INTERVAL",
        "seconds between metric reports to the dashboard",
        "1",
        type=positive,
    )
    option(
        "--poll-wait",
        "GATEWAY_POLL_WAIT",
        "seconds each long poll waits (at most 60)",
        "30",
        type=positive,
    )
    option(
        "--connect-timeout",
        "GATEWAY_CONNECT_TIMEOUT",
        "seconds to connect to an instance",
        "2",
        type=positive,
    )
    option(
        "--prod-fallback",
        "GATEWAY_PROD_FALLBACK",
        "send GRAY requests to prod when a service has no gray instance",
        "true",
        type=boolean,
    )
    option("--log-level", "GATEWAY_LOG_LEVEL", "logging level", "INFO")
