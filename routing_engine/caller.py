"""Who is calling: the client address and city a gray decision is made for.

The gateway and the dashboard's simulator both ask this, so "which city is 81.2.69.142?"
has one answer everywhere. Headers that name the client (`X-Forwarded-For`, the policy's
city header) are believed only from a trusted proxy: anyone else could choose their own
gray address or city by sending them.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from functools import lru_cache
from typing import Any

import geoip2.database
import geoip2.errors

from .cities import LOCAL_CITY

_Network = ipaddress.IPv4Network | ipaddress.IPv6Network
# Loopback, the private ranges (RFC 1918, unique-local IPv6) and link-local. Not Python's
# is_private, which also counts the documentation ranges (198.51.100.0/24, ...): those are
# stand-ins for public addresses.
LOCAL_NETWORKS = tuple(
    ipaddress.ip_network(cidr)
    for cidr in (
        "127.0.0.0/8",
        "10.0.0.0/8",
        "172.16.0.0/12",
        "192.168.0.0/16",
        "169.254.0.0/16",
        "::1/128",
        "fc00::/7",
        "fe80::/10",
    )
)


def parse_networks(entries: Iterable[str] | str) -> tuple[_Network, ...]:
    """CIDRs (or single addresses) from a list or a comma-separated string; ValueError
    naming the first bad one."""
    if isinstance(entries, str):
        entries = entries.split(",")
    networks = []
    for entry in entries:
        entry = entry.strip()
        if not entry:
            continue
        try:
            networks.append(ipaddress.ip_network(entry, strict=False))
        except ValueError as exc:
            raise ValueError(f"not an IP address or CIDR: {entry!r}") from exc
    return tuple(networks)


def _address(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        address = ipaddress.ip_address(text.strip())
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


class CallerResolver:
    """`resolve(peer, forwarded_for, city_header_value) -> (client ip, city or None)`.

    `trusted_proxies`: CIDRs whose `X-Forwarded-For` and city header are believed.
    `geoip_database`: path of a GeoIP2/GeoLite2 City database, or None (then only
    loopback and private addresses have a city: `local`).
    """

    def __init__(
        self, trusted_proxies: Iterable[str] | str = (), geoip_database: str | None = None
    ):
        self.trusted = parse_networks(trusted_proxies)
        self._reader: Any = None
        if geoip_database:
            self._reader = geoip2.database.Reader(geoip_database)
        # Per process, bounded: the same callers come back again and again.
        self.city_of = lru_cache(maxsize=65536)(self._lookup_city)
        self.is_trusted = lru_cache(maxsize=4096)(self._is_trusted)

    def _is_trusted(self, ip: str) -> bool:
        address = _address(ip)
        return address is not None and any(address in network for network in self.trusted)

    def client_ip(self, peer: str, forwarded_for: str | None) -> str:
        """The peer, or, when the peer is a trusted proxy, the nearest address in
        `X-Forwarded-For` that is not one of our trusted proxies (each proxy appends the
        address it saw, so the entries left of an untrusted one are the client's word)."""
        if not forwarded_for or not self.trusted or not self.is_trusted(peer):
            return peer
        hops = [hop.strip() for hop in forwarded_for.split(",")]
        for hop in reversed(hops):
            if _address(hop) is None:
                return peer  # a garbled chain says nothing reliable
            if not self.is_trusted(hop):
                return hop
        return hops[0]

    def _lookup_city(self, ip: str) -> str | None:
        address = _address(ip)
        if address is None:
            return None
        if any(address in network for network in LOCAL_NETWORKS):
            return LOCAL_CITY
        if self._reader is None:
            return None
        try:
            return self._reader.city(str(address)).city.name
        except (geoip2.errors.AddressNotFoundError, ValueError):
            return None

    def city(self, ip: str | None, city_header: str | None, trusted: bool) -> str | None:
        """The city of a caller at `ip`: the city header's when the request came through a
        trusted proxy, else the GeoIP answer for `ip` (`local` for this network)."""
        if city_header and trusted:
            return city_header.strip()
        return self.city_of(ip) if ip else None

    def resolve(
        self, peer: str, forwarded_for: str | None = None, city_header: str | None = None
    ) -> tuple[str, str | None]:
        """(client ip, city) of a request from `peer` carrying these headers' values."""
        ip = self.client_ip(peer, forwarded_for)
        trusted = bool(self.trusted) and self.is_trusted(peer)
        return ip, self.city(ip, city_header, trusted)

    def close(self) -> None:
        if self._reader is not None:
            self._reader.close()
