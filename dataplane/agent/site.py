"""What the agent's command line says about where and how the engine serves: the same for
every generation, unlike the Generation it renders."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from routing_engine import parse_networks
from routing_engine.caller import LOCAL_NETWORKS
from routing_engine.matcher import ip_ranges

Ranges = tuple[tuple[tuple[int, int], ...], tuple[tuple[int, int], ...]]


@dataclass(frozen=True)
class Site:
    host: str
    port: int
    admin_port: int  # Envoy's admin interface (loopback only); unused by nginx
    directory: Path  # the engine's configuration, logs and sockets
    trusted_proxies: tuple[str, ...] = ()
    geoip: str | None = None
    connect_timeout: float = 1.0
    request_timeout: float = 30.0
    worker_shutdown_timeout: float = 10.0
    workers: int | None = None  # worker threads (Envoy) or processes (nginx); None: per core
    sample_rate: float = 0.0  # the share of requests decide.lua samples; 0: none (no log)

    @property
    def sample_log(self) -> Path:
        return self.directory / "samples.log"

    @property
    def access_log(self) -> Path:
        return self.directory / "access.log"

    @property
    def listen(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


def network_ranges(networks) -> Ranges:
    """Disjoint sorted (first, last) ranges of IPv4 (IPv4-mapped IPv6 included) and IPv6,
    merged as the engine merges the policy's IP rules."""
    v4, v6 = ip_ranges(str(network) for network in networks)
    return tuple(v4), tuple(v6)


def trusted_ranges(site: Site) -> Ranges:
    return network_ranges(parse_networks(site.trusted_proxies))


def local_ranges() -> Ranges:
    """Loopback, private and link-local: the city `local` (routing_engine.caller)."""
    return network_ranges(LOCAL_NETWORKS)
