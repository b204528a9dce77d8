"""Signatures of pushed documents: `X-Graylane-Signature: t=<unix time>,v1=<hex>` where hex is
HMAC-SHA256(secret, b"<t>." + body). The timestamp is signed too, so a captured request
cannot be replayed later than `tolerance` seconds. Gateways verify with `verify`; several
`v1=` entries are accepted (a sender may sign with an old and a new secret while rotating).

Plain Python (no Django), so gateways can vendor this file.
"""

import hashlib
import hmac
import time

HEADER = "X-Graylane-Signature"
DEFAULT_TOLERANCE = 300


def _digest(secret: str, body: bytes, timestamp: int) -> str:
    return hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()


def sign(secret: str, body: bytes, timestamp: int | None = None) -> str:
    """The header value signing `body` at `timestamp` (default: now)."""
    t = int(time.time()) if timestamp is None else int(timestamp)
    return f"t={t},v1={_digest(secret, body, t)}"


class InvalidSignature(Exception):
    pass


def verify(
    secret: str,
    header: str,
    body: bytes,
    tolerance: int = DEFAULT_TOLERANCE,
    now: float | None = None,
) -> int:
    """Check `header` against `body`; returns the signed timestamp, else raises
    InvalidSignature saying why."""
    timestamp = None
    signatures = []
    for part in (header or "").split(","):
        key, _, value = part.strip().partition("=")
        if key == "t" and value.isdigit():
            timestamp = int(value)
        elif key == "v1" and value:
            signatures.append(value)
    if timestamp is None or not signatures:
        raise InvalidSignature(f"Malformed {HEADER} header.")
    if abs((time.time() if now is None else now) - timestamp) > tolerance:
        raise InvalidSignature("Timestamp outside the tolerance: a replay, or a wrong clock.")
    expected = _digest(secret, body, timestamp)
    if not any(hmac.compare_digest(expected, candidate) for candidate in signatures):
        raise InvalidSignature("Signature does not match.")
    return timestamp
