"""Where Graylane's own HTTP calls may go: the registries it syncs, the webhooks it posts
to, the Prometheus it asks, the Nacos config servers it publishes to.

Their addresses are typed by admins, so without a policy they are a way to reach what
only the server can reach: a cloud's metadata service (169.254.169.254 and its kin, which
hands out credentials), or link-local neighbours. An address is refused if it is in the
denied networks (OUTBOUND_DENIED_NETWORKS; by default link-local, the metadata addresses
and the unspecified ones, which reach the local host) or not in the allowed ones
(OUTBOUND_ALLOWED_NETWORKS; by default everywhere). Private and loopback addresses are
allowed by default: registries usually sit on internal networks.

It is checked twice: when an address is saved (`Policy.url_refusal`, for a field message)
and when a connection is made (`Policy.client`), because a host name may resolve elsewhere
later. The client resolves the name itself, checks every address it resolves to, and
connects to the checked address, so no second lookup can send it somewhere else.

Plain Python and httpx (the registry adapters use it without Django).
"""

from __future__ import annotations

import ipaddress
import socket
import ssl
import threading
from collections.abc import Iterable
from typing import Any
from urllib.parse import unquote, urlsplit

import httpx

from routing_engine import parse_networks

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network

LINK_LOCAL = ("169.254.0.0/16", "fe80::/10")
# Instance metadata services: AWS (IPv4, IPv6; ECS and EKS credentials), Azure, GCP,
# OpenStack and DigitalOcean (169.254.169.254), Alibaba Cloud, Oracle Cloud.
METADATA = (
    "169.254.169.254/32",
    "169.254.170.2/32",
    "169.254.170.23/32",
    "fd00:ec2::254/128",
    "fd00:ec2::23/128",
    "100.100.100.200/32",
    "192.0.0.192/32",
)
# 0.0.0.0 and :: as destinations reach the local host.
UNSPECIFIED = ("0.0.0.0/8", "::/128")
DEFAULT_DENIED = (*LINK_LOCAL, *METADATA, *UNSPECIFIED)
DEFAULT_ALLOWED = ("0.0.0.0/0", "::/0")

_METADATA = parse_networks(METADATA)
_LINK_LOCAL = parse_networks(LINK_LOCAL)
_UNSPECIFIED = parse_networks(UNSPECIFIED)


class AddressRefused(httpx.ConnectError):
    """The destination is one the policy refuses. An httpx.ConnectError, so a refused call
    fails as an unreachable one does (with this reason)."""

    def __init__(self, reason: str):
        super().__init__(reason)


def _address(text: str) -> Address:
    address = ipaddress.ip_address(text)
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped  # ::ffff:169.254.169.254 is 169.254.169.254
    return address


def _address_text(host: str) -> Address | None:
    """`host` as an address, if it is one written the usual way."""
    try:
        return _address(host)
    except ValueError:
        return None


def _within(address: Address, networks: Iterable[Network]) -> bool:
    return any(address.version == network.version and address in network for network in networks)


class Policy:
    def __init__(
        self, allowed: Iterable[str] = DEFAULT_ALLOWED, denied: Iterable[str] = DEFAULT_DENIED
    ):
        """CIDRs (or single addresses); ValueError naming the first bad one. No allowed
        networks at all means everywhere."""
        self.allowed = parse_networks(list(allowed)) or parse_networks(DEFAULT_ALLOWED)
        self.denied = parse_networks(list(denied))

    def refusal(self, address: Address) -> str | None:
        """Why a connection to `address` is refused ("... is a link-local address: ..."),
        or None if it is not."""
        why = self._why(address)
        return f"{address} is {why}" if why else None

    def _why(self, address: Address) -> str | None:
        if _within(address, self.denied):
            if _within(address, _METADATA):
                kind = "a cloud metadata address"
            elif _within(address, _LINK_LOCAL):
                kind = "a link-local address"
            elif _within(address, _UNSPECIFIED):
                kind = "an unspecified address (it reaches this host)"
            else:
                kind = "in a denied network"
            return f"{kind}: refused (OUTBOUND_DENIED_NETWORKS)"
        if not _within(address, self.allowed):
            return "not in OUTBOUND_ALLOWED_NETWORKS: refused"
        return None

    def addresses(self, host: str, port: int) -> list[str]:
        """The addresses `host` resolves to now, in the resolver's order, once each; all of
        them allowed, else AddressRefused (a name that also points somewhere refused is not
        trusted with the rest). socket.gaierror when it does not resolve."""
        literal = _address_text(unquote(host))  # "fe80::1%25eth0" in a URL has a zone
        if literal is not None:
            if reason := self.refusal(literal):
                raise AddressRefused(reason)
            return [host]
        found: list[str] = []
        for *_, sockaddr in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM):
            text = str(sockaddr[0])
            address = _address(text)
            if why := self._why(address):
                raise AddressRefused(f"{host} resolves to {address}, which is {why}")
            if text not in found:
                found.append(text)
        return found

    def url_refusal(self, url: str) -> str | None:
        """At save: why `url` is refused (its host is, or now resolves to, a refused
        address), or None. A name that does not resolve here and now passes: the check at
        connect time still applies."""
        try:
            parts = urlsplit(url)
            host, port = parts.hostname, parts.port
        except ValueError:
            return None  # not a URL: its field's validation says so
        if not host:
            return None
        try:
            self.addresses(host, port or (443 if parts.scheme == "https" else 80))
        except AddressRefused as exc:
            return str(exc)
        except (socket.gaierror, UnicodeError):
            pass
        return None

    def client(self, *, verify: ssl.SSLContext | bool = True, **options: Any) -> httpx.Client:
        """An httpx.Client whose every connection goes only where this policy allows
        (`verify` as httpx's; `options` for httpx.Client). Environment proxies are not
        used: the connection must be the checked one."""
        return httpx.Client(transport=GuardedTransport(self, verify=verify), **options)


class GuardedTransport(httpx.BaseTransport):
    """httpx's transport, connecting only to addresses it resolved and checked itself. A
    host name is resolved once for the life of the transport (a client: one registry sync,
    one webhook delivery), so every connection goes to an address that was checked, and
    requests after the first pay nothing; the name is kept for the Host header and for TLS
    (SNI and the certificate)."""

    def __init__(self, policy: Policy, verify: ssl.SSLContext | bool = True):
        self.policy = policy
        self.verify = verify
        self._lock = threading.Lock()  # registries are read by several threads at once
        self._addresses: dict[tuple[str, int], list[str]] = {}
        # One pool per host name: a pooled TLS connection verified for one name is never
        # reused for another name on the same address.
        self._pools: dict[str, httpx.HTTPTransport] = {}

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        host = request.url.host
        addresses, pool = self._checked(host, request.url.port or _default_port(request.url))
        if addresses == [host]:  # an address already, and allowed: nothing to pin
            return pool.handle_request(request)
        failure: httpx.ConnectError | None = None
        for address in addresses:  # in turn, as socket.create_connection tries them
            pinned = httpx.Request(
                request.method,
                request.url.copy_with(host=address),
                headers=request.headers,
                stream=request.stream,
                extensions={**request.extensions, "sni_hostname": host},
            )
            try:
                return pool.handle_request(pinned)
            except httpx.ConnectError as exc:
                failure = exc
        assert failure is not None  # getaddrinfo answers an address or raises
        raise failure

    def _checked(self, host: str, port: int) -> tuple[list[str], httpx.HTTPTransport]:
        with self._lock:
            addresses = self._addresses.get((host, port))
            if addresses is None:
                try:
                    addresses = self.policy.addresses(host, port)
                except (socket.gaierror, UnicodeError) as exc:
                    raise httpx.ConnectError(f"{host}: {exc}") from exc
                self._addresses[host, port] = addresses
            if host not in self._pools:
                self._pools[host] = httpx.HTTPTransport(verify=self.verify)
            return addresses, self._pools[host]

    def close(self) -> None:
        with self._lock:
            for pool in self._pools.values():
                pool.close()
            self._pools.clear()


def _default_port(url: httpx.URL) -> int:
    return 443 if url.scheme == "https" else 80


DEFAULT_POLICY = Policy()
