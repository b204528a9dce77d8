"""Which version a request asks for at each service it reaches (a hop), and how the gateway
tells the later hops (docs/gateway-protocol.md, "Lanes on the wire").

At a service, a request under

* `ALL` may reach any routable instance;
* `PROD` asks for the service's prod version;
* `GRAY` in the gray lane asks for the service's gray version, and falls back to prod when
  no instance of it is routable;
* `GRAY` in another lane asks for the lane's member version when the service is a member
  (falling back to prod the same way), else for prod: it never reaches another lane's
  version.

No request reaches a quarantined version of a service, whatever its flag.

The gateway decides the flag and the lane once, where the request enters, and sends the
versions of the later hops with it in `X-Gray-Versions`, built from the very document it
decided by, so every hop of one request routes by the same generation:

    X-Gray-Versions: *=V2/V1,order-app=V3/V1,user-app=V1,!pay-app=V4

an entry per service (`*`: any other), `ask` or `ask/fallback`, and `!service=version` for
each quarantined version. Service names and versions are percent-encoded where they hold
characters of this grammar. A hop without the header (a caller that is no gateway, a Nacos
gateway) decides by its own configuration.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from urllib.parse import quote, unquote

from .lanes import GRAY_LANE
from .matcher import ALL, GRAY, PROD

LANE_HEADER = "X-Gray-Lane"
VERSIONS_HEADER = "X-Gray-Versions"
BAGGAGE_FLAG_KEY = "graylane.gray"
BAGGAGE_LANE_KEY = "graylane.lane"
ANY_SERVICE = "*"
# What a service name or version keeps as it is in the header; the rest is percent-encoded.
_SAFE = "._:@-~+"


@dataclass(frozen=True, slots=True)
class Ask:
    """The version a request asks for at one service, and the one it falls back to when the
    asked version has no routable instance (None: no fallback)."""

    version: str
    fallback: str | None = None


@dataclass(frozen=True, slots=True)
class HopVersions:
    """The parsed `X-Gray-Versions` of a request."""

    asks: Mapping[str, Ask] = field(default_factory=dict)
    quarantined: Mapping[str, frozenset[str]] = field(default_factory=dict)

    def ask(self, service: str) -> Ask | None:
        return self.asks.get(service) or self.asks.get(ANY_SERVICE)

    def excluded(self, service: str) -> frozenset[str]:
        return self.quarantined.get(service, frozenset())


NO_HOP_VERSIONS = HopVersions()


def ask_for(
    flag: str,
    lane: str | None,
    prod: str,
    gray: str,
    members: Mapping[str, str] | None = None,
) -> Ask | None:
    """What a request asks for at a service whose versions are `prod` and `gray` (the gray
    lane's) and which is a member of the lanes in `members` (lane -> version). None: any."""
    if flag == ALL:
        return None
    if flag == PROD:
        return Ask(prod)
    if flag != GRAY:
        raise ValueError(f"Unknown gray flag {flag!r}; expected {ALL}, {PROD} or {GRAY}.")
    if lane is None or lane == GRAY_LANE:
        return Ask(gray, prod)
    version = (members or {}).get(lane)
    return Ask(version, prod) if version is not None else Ask(prod)


def render(
    asks: Mapping[str, Ask | None], quarantined: Mapping[str, Iterable[str]] | None = None
) -> str:
    """An `X-Gray-Versions` value; `asks` may hold ANY_SERVICE. Entries asking nothing are
    left out."""
    parts = []
    for service, ask in asks.items():
        if ask is None:
            continue
        key = ANY_SERVICE if service == ANY_SERVICE else quote(service, safe=_SAFE)
        value = quote(ask.version, safe=_SAFE)
        if ask.fallback is not None and ask.fallback != ask.version:
            value += "/" + quote(ask.fallback, safe=_SAFE)
        parts.append(f"{key}={value}")
    for service, versions in (quarantined or {}).items():
        key = quote(service, safe=_SAFE)
        parts += [f"!{key}={quote(version, safe=_SAFE)}" for version in sorted(versions)]
    return ",".join(parts)


def parse(value: str | bytes | None) -> HopVersions:
    """The entries of an `X-Gray-Versions` value; malformed entries are ignored (the header
    only narrows where a request goes, and a hop without it decides by its own settings)."""
    if not value:
        return NO_HOP_VERSIONS
    if isinstance(value, bytes):
        value = value.decode("latin-1")
    asks: dict[str, Ask] = {}
    quarantined: dict[str, set[str]] = {}
    for entry in value.split(","):
        key, equals, rest = entry.strip().partition("=")
        if not equals or not key or not rest:
            continue
        if key.startswith("!"):
            quarantined.setdefault(unquote(key[1:]), set()).add(unquote(rest))
            continue
        asked, _, fallback = rest.partition("/")
        if not asked:
            continue
        asks[key if key == ANY_SERVICE else unquote(key)] = Ask(
            unquote(asked), unquote(fallback) if fallback else None
        )
    return HopVersions(
        asks, {service: frozenset(versions) for service, versions in quarantined.items()}
    )
