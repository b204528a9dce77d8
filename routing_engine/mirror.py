"""Shadow traffic: a lane member (or the gray lane's service override) may mirror a share of
its service's PROD requests to its version, `"mirror": {"percent": 10}`. The mirrored copy's
answer is compared with prod's and discarded (docs/gateway-protocol.md, "Shadow traffic").

Which requests: idempotent methods only, and of those the ones whose bucket (blake2b of the
method, target and client address, modulo 10,000) is below round(100 * percent). The hash
is stable, so a request sent again is mirrored again, or not. The field is validated with
the policy's (routing_engine.policy.normalize_mirror).
"""

from __future__ import annotations

from collections.abc import Mapping
from hashlib import blake2b
from typing import Any

# Only methods that change nothing are mirrored: the copy must never repeat a write.
MIRRORED_METHODS = frozenset((b"GET", b"HEAD", b"OPTIONS"))
SHADOW_HEADER = "X-Gray-Shadow"
BUCKETS = 10_000


def mirror_threshold(mirror: Mapping[str, Any]) -> int:
    """Buckets (of 10,000) a mirror at `percent` takes."""
    return round(float(mirror["percent"]) * 100)


def mirror_bucket(method: bytes, target: bytes, client: bytes) -> int:
    digest = blake2b(b"%b %b %b" % (method, target, client), digest_size=8).digest()
    return int.from_bytes(digest, "big") % BUCKETS
