"""Shadow traffic: a lane member (or the gray lane's service override) may mirror a share of
its service's PROD requests to its version, `"mirror": {"percent": 10}`. The mirrored copy's
answer is compared with prod's and discarded (docs/gateway-protocol.md, "Shadow traffic").

Which requests: idempotent methods only, and of those the ones whose bucket (blake2b of the
method, target and client address, modulo 10,000) is below round(100 * percent). The hash
is stable, so a request sent again is mirrored again, or not.
"""

from __future__ import annotations

from collections.abc import Mapping
from hashlib import blake2b
from typing import Any

from .policy import PolicyError, _Errors, canonical_percent, percent_problem

MIRROR_FIELDS = ("percent",)
# Only methods that change nothing are mirrored: the copy must never repeat a write.
MIRRORED_METHODS = frozenset((b"GET", b"HEAD", b"OPTIONS"))
SHADOW_HEADER = "X-Gray-Shadow"
BUCKETS = 10_000


def mirror_problem(value: Any) -> dict[str, str]:
    """Problems of a `mirror` object by its field ("" for the object itself); none: {}."""
    if not isinstance(value, Mapping):
        return {"": 'Must be an object: {"percent": p}, 0 < p <= 100.'}
    problems = {f".{key}": "Unknown field." for key in value if key not in MIRROR_FIELDS}
    if "percent" not in value:
        problems[".percent"] = "This field is required."
        return problems
    percent = value["percent"]
    problem = percent_problem(percent)
    if problem is None and percent == 0:
        problem = "Must be above 0 (leave `mirror` out to mirror nothing)."
    if problem:
        problems[".percent"] = problem
    return problems


def normalize_mirror(value: Any, field: str, errors: _Errors) -> dict[str, Any] | None:
    problems = mirror_problem(value)
    for suffix, message in problems.items():
        errors.add(field + suffix, message)
    if problems:
        return None
    return {"percent": canonical_percent(value["percent"])}


def check_mirror(value: Any, field: str = "mirror") -> dict[str, Any]:
    """A valid mirror in its canonical form; PolicyError names the bad field."""
    errors = _Errors()
    result = normalize_mirror(value, field, errors)
    if errors or result is None:
        raise PolicyError(errors)
    return result


def mirror_threshold(mirror: Mapping[str, Any]) -> int:
    """Buckets (of 10,000) a mirror at `percent` takes."""
    return round(float(mirror["percent"]) * 100)


def mirror_bucket(method: bytes, target: bytes, client: bytes) -> int:
    digest = blake2b(b"%b %b %b" % (method, target, client), digest_size=8).digest()
    return int.from_bytes(digest, "big") % BUCKETS
