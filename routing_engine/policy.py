"""Validation, normalisation, patching, checksums and diffs of gray policy documents.

This module is the single source of truth for what a valid policy is: the REST
serializer and the dashboard form both call :func:`normalize_policy` so that the
two can never disagree.
"""

from __future__ import annotations

import copy
import hashlib
import ipaddress
import json
import re
from collections.abc import Callable, Mapping
from typing import Any

DEFAULT_POLICY: dict[str, Any] = {
    "enabled": False,
    "routing": False,
    "header": {"name": "", "value": ""},
    "ips": [],
    "cities": [],
    "users": [],
    "user_header": "X-User-No",
    "city_header": "X-City",
    "percent": 0,
    "versions": {"prod": "V1", "gray": "V2"},
}

# Sub-documents that PATCH merges one level deep instead of replacing.
_NESTED_FIELDS = ("header", "versions")

MAX_ENTRY_LENGTH = 256

NON_FIELD_ERRORS = "non_field_errors"

# RFC 9110 section 5.6.2: token = 1*tchar.
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")

# RFC 9110 section 5.5: a field value may not contain CR, LF, NUL or other controls
# (HTAB excepted); such a value could never arrive in a request anyway. Every string of a
# policy is matched against request headers or instance metadata, so none may hold them
# (nor could PostgreSQL store a NUL).
_FIELD_VALUE_FORBIDDEN = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")
CONTROL_CHARACTERS = "Must not contain control characters."


def has_control_characters(text: str) -> bool:
    return _FIELD_VALUE_FORBIDDEN.search(text) is not None


_IPV4_MAPPED = ipaddress.IPv6Network("::ffff:0:0/96")


class PolicyError(ValueError):
    """Raised with every problem of a document at once, DRF style: field -> messages."""

    def __init__(self, errors: Mapping[str, list[str]]):
        self.errors: dict[str, list[str]] = {field: list(msgs) for field, msgs in errors.items()}
        super().__init__(self.errors)


class _Errors(dict[str, list[str]]):
    def add(self, field: str, message: str) -> None:
        self.setdefault(field, []).append(message)


def _type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _boolean(value: Any, field: str, errors: _Errors) -> bool | None:
    # `1` and "yes" are refused: an API client sending them has a bug worth surfacing.
    if type(value) is bool:
        return value
    errors.add(field, f"Must be a boolean (true or false), got {_type_name(value)}.")
    return None


def _string(value: Any, field: str, errors: _Errors) -> str | None:
    if not isinstance(value, str):
        errors.add(field, f"Must be a string, got {_type_name(value)}.")
        return None
    value = value.strip()
    if len(value) > MAX_ENTRY_LENGTH:
        errors.add(field, f"Must be at most {MAX_ENTRY_LENGTH} characters.")
    if _FIELD_VALUE_FORBIDDEN.search(value):
        errors.add(field, CONTROL_CHARACTERS)
    return value


def _header_name(value: Any, field: str, errors: _Errors, *, allow_empty: bool) -> str | None:
    name = _string(value, field, errors)
    if name is None:
        return None
    if not name:
        if not allow_empty:
            errors.add(field, "This field may not be blank.")
        return name
    if not _TOKEN.fullmatch(name):
        errors.add(field, f"{name!r} is not a valid HTTP header name (RFC 9110 token).")
    return name


def percent_problem(value: Any) -> str | None:
    """Why `value` is not a percent: a number from 0 to 100 with at most two decimals (one
    basis point, a bucket of the users: docs/gateway-protocol.md)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return f"Must be a number from 0 to 100 with at most two decimals, got {value!r}."
    if not 0 <= value <= 100:
        return f"Must be between 0 and 100, got {value}."
    if isinstance(value, float) and abs(value * 100 - round(value * 100)) > 1e-6:
        return f"At most two decimals (0.01 % steps), got {value!r}."
    return None


def canonical_percent(value: int | float) -> int | float:
    """Whole values as integers (so documents written before fractional percents keep their
    checksums), others rounded to two decimals."""
    hundredths = round(value * 100)
    return hundredths // 100 if hundredths % 100 == 0 else hundredths / 100


def percent_threshold(percent: int | float) -> int:
    """The number of 0.01 % buckets (of 10,000) a percent takes."""
    return round(percent * 100)


def _percent(value: Any, field: str, errors: _Errors) -> int | float | None:
    problem = percent_problem(value)
    if problem:
        errors.add(field, problem)
        return None
    return canonical_percent(value)


def _fields(
    value: Any, field: str, keys: tuple[str, ...], errors: _Errors
) -> dict[str, Any] | None:
    """Check that a sub-document is an object with exactly `keys`; return those present."""
    if not isinstance(value, Mapping):
        errors.add(field, f"Must be an object with keys {', '.join(keys)}.")
        return None
    for key in value:
        if key not in keys:
            errors.add(f"{field}.{key}", "Unknown field.")
    for key in keys:
        if key not in value:
            errors.add(f"{field}.{key}", "This field is required.")
    return {key: value[key] for key in keys if key in value}


def _entries(
    value: Any,
    field: str,
    errors: _Errors,
    clean: Callable[[str], str],
    key: Callable[[str], str] | None = None,
) -> list[str] | None:
    """Validate a list of strings: strip, drop blanks, clean, de-duplicate (first seen wins).

    `clean` returns the normalised entry or raises ValueError with the message to report.
    `key` decides what counts as a duplicate (default: the normalised entry itself).
    """
    if isinstance(value, str) or not isinstance(value, list | tuple):
        errors.add(field, f"Must be a list of strings, got {_type_name(value)}.")
        return None
    result: list[str] = []
    seen: set[str] = set()
    failed = False
    for entry in value:
        if not isinstance(entry, str):
            errors.add(field, f"{entry!r} is not a string.")
            failed = True
            continue
        entry = entry.strip()
        if not entry:
            continue
        try:
            entry = clean(entry)
        except ValueError as exc:
            errors.add(field, str(exc))
            failed = True
            continue
        dedup_key = key(entry) if key else entry
        if dedup_key not in seen:
            seen.add(dedup_key)
            result.append(entry)
    return None if failed else result


def _bounded(entry: str) -> str:
    if len(entry) > MAX_ENTRY_LENGTH:
        raise ValueError(f"{entry[:32]!r}... is longer than {MAX_ENTRY_LENGTH} characters.")
    if _FIELD_VALUE_FORBIDDEN.search(entry):
        raise ValueError(f"{entry[:32]!r}: {CONTROL_CHARACTERS.lower()}")
    return entry


def normalize_ip(entry: str) -> str:
    """Canonical text of an IP address or CIDR; ValueError with a user-facing message.

    A host CIDR (/32, /128) becomes the bare address and an IPv4-mapped IPv6 rule
    becomes the IPv4 rule, because the matcher treats both spellings as the same.
    """
    if "%" in entry:
        raise ValueError(f"{entry!r}: IPv6 zone indexes are not supported.")
    if "/" not in entry:
        try:
            address = ipaddress.ip_address(entry)
        except ValueError:
            raise ValueError(f"{entry!r} is not an IP address or CIDR.") from None
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
            address = address.ipv4_mapped
        return str(address)
    try:
        network = ipaddress.ip_network(entry)
    except ValueError:
        try:
            suggestion = ipaddress.ip_network(entry, strict=False)
        except ValueError:
            raise ValueError(f"{entry!r} is not an IP address or CIDR.") from None
        raise ValueError(f"{entry!r} has host bits set; did you mean {suggestion}?") from None
    if (
        isinstance(network, ipaddress.IPv6Network)
        and network.prefixlen >= 96
        and network.subnet_of(_IPV4_MAPPED)
    ):
        network = ipaddress.IPv4Network(
            (int(network.network_address) & 0xFFFFFFFF, network.prefixlen - 96)
        )
    if network.prefixlen == network.max_prefixlen:
        return str(network.network_address)
    return str(network)


def _city_key(city: str) -> str:
    return city.casefold()


def _header(value: Any, field: str, errors: _Errors) -> dict[str, Any] | None:
    header = _fields(value, field, ("name", "value"), errors)
    if header is None:
        return None
    name = value = None
    if "name" in header:
        name = _header_name(header["name"], f"{field}.name", errors, allow_empty=True)
    if "value" in header:
        value = _string(header["value"], f"{field}.value", errors)
    if name and value == "":
        errors.add(f"{field}.value", "Required when a header name is set.")
    return {"name": name, "value": value}


def _versions(value: Any, field: str, errors: _Errors) -> dict[str, Any] | None:
    versions = _fields(value, field, ("prod", "gray"), errors)
    if versions is None:
        return None
    found = {}
    for key, version in versions.items():
        found[key] = _string(version, f"{field}.{key}", errors)
        if found[key] == "":
            errors.add(f"{field}.{key}", "This field may not be blank.")
    prod, gray = found.get("prod"), found.get("gray")
    if prod and prod == gray:
        errors.add(field, f"prod and gray must be different versions (both {prod!r}).")
    return {"prod": prod, "gray": gray}


def _request_header(value: Any, field: str, errors: _Errors) -> str | None:
    return _header_name(value, field, errors, allow_empty=False)


_VALIDATORS: dict[str, Callable[[Any, str, _Errors], Any]] = {
    "enabled": _boolean,
    "routing": _boolean,
    "header": _header,
    "ips": lambda value, field, errors: _entries(value, field, errors, normalize_ip),
    # Matching ignores case, so "Local" and "local" are one entry.
    "cities": lambda value, field, errors: _entries(value, field, errors, _bounded, key=_city_key),
    "users": lambda value, field, errors: _entries(value, field, errors, _bounded),
    "user_header": _request_header,
    "city_header": _request_header,
    "percent": _percent,
    "versions": _versions,
}


def normalize_policy(data: Mapping[str, Any]) -> dict[str, Any]:
    """Validate a full policy document and return its normalised copy.

    Raises PolicyError listing every problem at once. The result has exactly the
    keys of DEFAULT_POLICY.
    """
    errors = _Errors()
    if not isinstance(data, Mapping):
        errors.add(NON_FIELD_ERRORS, f"Expected an object, got {_type_name(data)}.")
        raise PolicyError(errors)
    for key in data:
        if key not in _VALIDATORS:
            errors.add(str(key), "Unknown field.")
    result = {}
    for key, validate in _VALIDATORS.items():
        if key in data:
            result[key] = validate(data[key], key, errors)
        else:
            errors.add(key, "This field is required.")
    if errors:
        raise PolicyError(errors)
    return result


SERVICE_ROUTING_FIELDS = ("percent", "targeted", "mirror")
MIRROR_FIELDS = ("percent",)


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


def normalize_service_routing(override: Mapping[str, Any]) -> dict[str, Any]:
    """The routing part of a service's override (`percent`, `targeted`, see GrayMatcher, and
    `mirror`, routing_engine.mirror; all optional), validated; PolicyError names the bad
    field. Absent or null: inherited."""
    errors = _Errors()
    result: dict[str, Any] = {}
    if override.get("percent") is not None:
        result["percent"] = _percent(override["percent"], "percent", errors)
    if override.get("targeted") is not None:
        result["targeted"] = _boolean(override["targeted"], "targeted", errors)
    if override.get("mirror") is not None:
        result["mirror"] = normalize_mirror(override["mirror"], "mirror", errors)
    if errors:
        raise PolicyError(errors)
    return result


def merge_patch(current: Mapping[str, Any], patch: Mapping[str, Any]) -> dict[str, Any]:
    """Apply PATCH semantics; the result still has to go through normalize_policy.

    Top-level keys are replaced, except `header` and `versions` which are merged one
    level deep so that {"header": {"value": "x"}} keeps the header name.
    """
    if not isinstance(patch, Mapping):
        raise PolicyError({NON_FIELD_ERRORS: [f"Expected an object, got {_type_name(patch)}."]})
    merged = copy.deepcopy(dict(current))
    for key, value in patch.items():
        value = copy.deepcopy(value)
        if key in _NESTED_FIELDS and isinstance(value, Mapping):
            base = merged.get(key)
            if isinstance(base, Mapping):
                value = {**base, **value}
        merged[key] = value
    return merged


def canonical_json(obj: Any) -> str:
    """One spelling per value, so equal documents give equal checksums."""
    return json.dumps(
        obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )


def checksum(obj: Any) -> str:
    return hashlib.sha256(canonical_json(obj).encode("utf-8")).hexdigest()


def diff_documents(old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Structural diff for people: one entry per changed leaf, dotted field paths.

    Lists are compared as sets (their order carries no meaning in a policy):
    {"field", "added", "removed"}. Anything else: {"field", "before", "after"}.
    A missing key compares as null (or as an empty list/object).
    """
    changes: list[dict[str, Any]] = []
    _diff_into(changes, "", old or {}, new)
    return changes


def _diff_into(changes: list[dict[str, Any]], path: str, before: Any, after: Any) -> None:
    if _both(before, after, Mapping):
        before = before or {}
        after = after or {}
        keys = [*after, *(key for key in before if key not in after)]
        for key in keys:
            child = f"{path}.{key}" if path else str(key)
            _diff_into(changes, child, before.get(key), after.get(key))
    elif _both(before, after, list):
        before_keys = {_item_key(item) for item in before or ()}
        after_keys = {_item_key(item) for item in after or ()}
        added = [item for item in after or () if _item_key(item) not in before_keys]
        removed = [item for item in before or () if _item_key(item) not in after_keys]
        if added or removed:
            changes.append({"field": path, "added": added, "removed": removed})
    elif before != after or type(before) is not type(after):
        changes.append({"field": path, "before": before, "after": after})


def _both(before: Any, after: Any, kind: type) -> bool:
    """Both values are of `kind` or missing (None), and at least one is present."""
    return (
        (before is None or isinstance(before, kind))
        and (after is None or isinstance(after, kind))
        and (before is not None or after is not None)
    )


def _item_key(item: Any) -> tuple[bool, str]:
    # Instances in a list are dicts (unhashable); their canonical JSON identifies them.
    return (True, item) if isinstance(item, str) else (False, canonical_json(item))


def rebase_policy(
    base: Mapping[str, Any], ours: Mapping[str, Any], theirs: Mapping[str, Any]
) -> tuple[dict[str, Any], list[str]]:
    """Three-way merge for an edit made on `base` while `theirs` was published meanwhile.

    Fields only one side changed take that side; list entries are merged as added/removed
    sets (both sides' additions survive); for a scalar both changed, ours wins and its
    dotted name is returned in the clash list so the editor can point at it."""
    merged: dict[str, Any] = {}
    clashes: list[str] = []
    for key in ours.keys() | theirs.keys():
        merged[key] = _rebase_value(key, base.get(key), ours.get(key), theirs.get(key), clashes)
    return merged, sorted(clashes)


def _rebase_value(path: str, base: Any, ours: Any, theirs: Any, clashes: list[str]) -> Any:
    if ours == base:
        return theirs
    if theirs == base or ours == theirs:
        return ours
    if isinstance(ours, list) and isinstance(theirs, list) and isinstance(base, list):
        removed = {entry for entry in base if entry not in ours}
        added = [entry for entry in ours if entry not in base and entry not in theirs]
        return [entry for entry in theirs if entry not in removed] + added
    if isinstance(ours, Mapping) and isinstance(theirs, Mapping) and isinstance(base, Mapping):
        return {
            key: _rebase_value(
                f"{path}.{key}", base.get(key), ours.get(key), theirs.get(key), clashes
            )  # fmt: skip
            for key in ours.keys() | theirs.keys()
        }
    clashes.append(path)
    return ours
