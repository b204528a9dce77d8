"""Which headers cross the gateway (RFC 9110 §7.6.1) and what it adds.

Hop-by-hop headers describe one connection, not the message: Connection and every header
it names, Keep-Alive, TE, Trailer, Transfer-Encoding, Upgrade and the Proxy-* family are
dropped in both directions. The gateway frames each side's body itself (Content-Length
kept, chunked re-made). A client never chooses its own gray flag or lane: its
X-Gray-Status, X-Gray-Lane and X-Gray-Versions, and any gray member of its W3C `baggage`
(graylane.gray, graylane.lane), are dropped before the gateway sets its own.
"""

from __future__ import annotations

from routing_engine import GRAY_STATUS_HEADER
from routing_engine.hops import LANE_HEADER, VERSIONS_HEADER
from routing_engine.mirror import SHADOW_HEADER

HOP_BY_HOP = frozenset(
    (
        b"connection",
        b"keep-alive",
        b"te",
        b"trailer",
        b"transfer-encoding",
        b"upgrade",
        b"proxy-connection",
        b"proxy-authenticate",
        b"proxy-authorization",
        b"proxy-authentication-info",
    )
)
NOTHING: frozenset[bytes] = frozenset()
# Connection values that name no other header: nearly every message has one of these, and
# they need no parsing.
PLAIN_CONNECTION = frozenset((b"keep-alive", b"close"))
# The route the gateway decides (docs/gateway-protocol.md, "Lanes on the wire"): never a
# client's.
# Dropped from clients: only the gateway says a request is a shadow copy (which no metric
# counts).
ROUTE_HEADERS = frozenset(
    name.lower().encode()
    for name in (GRAY_STATUS_HEADER, LANE_HEADER, VERSIONS_HEADER, SHADOW_HEADER)
)
SHUTTING_DOWN = b"x-instance-shutting-down"
# Request headers the gateway drops, rewrites or reads; all others pass as they came.
REQUEST_HANDLED = HOP_BY_HOP | {
    b"content-length",
    b"x-forwarded-for",
    b"x-forwarded-proto",
    *ROUTE_HEADERS,
    b"expect",
    b"baggage",
    b"host",
}
# Answer headers the gateway drops or reads (the framing, the shutting-down marker).
ANSWER_HANDLED = HOP_BY_HOP | {b"content-length", SHUTTING_DOWN}


def connection_listed(headers: list[tuple[bytes, bytes]]) -> frozenset[bytes]:
    """Header names (lower-case) that the message's Connection headers declare
    hop-by-hop."""
    listed: set[bytes] = set()
    for name, value in headers:
        if name == b"connection":
            listed.update(token.strip().lower() for token in value.split(b","))
    return frozenset(listed)


def without_listed(lines: list[bytes], listed: frozenset[bytes]) -> list[bytes]:
    """Header lines kept as [name, b": ", value, b"\r\n", ...] (lower-case names), less
    those the Connection header declares hop-by-hop: the rare message whose Connection
    names more than keep-alive or close."""
    kept: list[bytes] = []
    for at in range(0, len(lines), 4):
        if lines[at] not in listed:
            kept += lines[at : at + 4]
    return kept


def is_hop_by_hop(name: bytes, listed: frozenset[bytes]) -> bool:
    """`name` lower-case."""
    return name in HOP_BY_HOP or name.startswith(b"proxy-") or name in listed


def strip_gray_baggage(value: bytes) -> bytes:
    """A `baggage` value without members whose key names a gray flag (W3C Baggage: a
    comma-separated list of `key=value;properties`)."""
    kept = [
        member
        for member in value.split(b",")
        if member.strip() and b"gray" not in member.split(b"=", 1)[0].strip().lower()
    ]
    return b",".join(kept)
