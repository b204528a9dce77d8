"""What a registry may tell us: the one check every instance of every registry (embedded, Nacos,
Eureka) passes before it is stored (plain Python, no Django).

* The adapters turn each entry of a listing into a :class:`RegistryInstance` with the
  ``as_*`` helpers here; an entry they cannot read becomes a :class:`SkippedInstance` in the
  listing instead of failing the whole listing.
* The sync screens every listing with :func:`screen` (service name, :func:`check_instance`,
  duplicate ids): a bad instance is skipped and reported, the others are synced.
* The embedded registry refuses the same things at registration (HTTP 400).

Limits follow the columns the values are stored in (``registry_sync.models``) and Nacos' own
rules (weights 0 to 10000; names of letters, digits and ``._:@-``, ``@@`` being its group
separator); what every reader of a gateway document checks too (host, port, weight, service
name) is routing_engine.records', so what is stored is what gateways take. Nothing stored may
break a page or a URL: no ``/``, no whitespace, no NUL, no text that is not valid Unicode.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from itertools import chain
from typing import Any

from routing_engine.records import (
    MAX_SHOWN,
    SERVICE_NAME,
    host_problem,
    port_problem,
    show,
    weight_problem,
)

from .base import RegistryInstance, SkippedInstance

MAX_NAME_LENGTH = 255  # Service.name, Instance.instance_id
MAX_CLUSTER_LENGTH = 64  # Instance.cluster
MAX_METADATA_KEYS = 64
MAX_METADATA_BYTES = 16 * 1024  # as compact JSON

# Nacos builds ids as ip#port#cluster#group@@service; Eureka's are host:app:port or custom.
INSTANCE_ID = re.compile(r"[A-Za-z0-9._:@#+=-]{1,255}\Z")
CLUSTER = re.compile(r"[A-Za-z0-9._:-]{1,64}\Z")
# A Nacos namespace id or group name (the embedded registry's columns hold 128).
GROUP = re.compile(r"[A-Za-z0-9._:-]{1,128}\Z")


class InvalidInstance(ValueError):
    """One instance (or one field of it) that cannot be stored; ``field`` names the field
    ("service", "instance_id", "host", "port", "weight", "metadata", "cluster", ...)."""

    def __init__(self, field: str, reason: str):
        super().__init__(reason)
        self.field = field
        self.reason = reason


def describe(entry: SkippedInstance) -> str:
    """``'svc' 'id': reason``, for operators."""
    who = show(entry.service)
    if entry.instance_id is not None:
        who += f" {show(entry.instance_id)}"
    return f"{who}: {entry.reason}"


def _check_text(field: str, value: Any, what: str | None = None) -> str:
    """``value`` is text that can be stored (no NUL: PostgreSQL refuses it; no lone
    surrogate: it cannot be encoded). ``what`` names it in the reason (default: field)."""
    what = what or field
    if not isinstance(value, str):
        raise InvalidInstance(field, f"{what} {show(value)} is not text")
    if "\x00" in value:
        raise InvalidInstance(field, f"{what} {show(value)} contains a NUL byte")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInstance(field, f"{what} {show(value)} is not valid Unicode") from None
    return value


# -- what the adapters use to read one entry ---------------------------------------------------


def as_text(field: str, value: Any) -> str:
    """A field that must be present as text (``None``/missing, numbers, objects refused)."""
    if value is None:
        raise InvalidInstance(field, f"{field} is missing")
    return _check_text(field, value)


def as_port(value: Any) -> int:
    """An integer port, or its decimal string (Eureka's codec); no bools, no fractions."""
    if value is None:
        raise InvalidInstance("port", "port is missing")
    if isinstance(value, str) and value.strip().isascii() and value.strip().isdecimal():
        value = int(value.strip())
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidInstance("port", f"port {show(value)} is not a whole number")
    return value


def as_weight(value: Any, default: float = 1.0) -> float:
    """A number or numeric string (missing: ``default``); range and NaN are checked later."""
    if value is None:
        return default
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            raise InvalidInstance("weight", f"weight {show(value)} is not a number") from None
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise InvalidInstance("weight", f"weight {show(value)} is not a number")
    return float(value)


def as_metadata(raw: Any) -> dict[str, str]:
    """A JSON object (missing: empty); values that are not text become their JSON."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise InvalidInstance("metadata", f"metadata is {type(raw).__name__}, not an object")
    if len(raw) > MAX_METADATA_KEYS:
        raise InvalidInstance("metadata", _too_many_keys(len(raw)))
    return {
        str(key): value if isinstance(value, str) else json.dumps(value)
        for key, value in raw.items()
    }


def skipped(service: str, instance_id: Any, error: Exception) -> SkippedInstance:
    """The entry an adapter could not read. ``instance_id`` is kept only if it is text."""
    reason = error.reason if isinstance(error, InvalidInstance) else _unreadable(error)
    return SkippedInstance(
        service=service,
        instance_id=instance_id if isinstance(instance_id, str) else None,
        reason=reason,
    )


def _unreadable(error: Exception) -> str:
    if isinstance(error, KeyError):
        return f"field {show(error.args[0] if error.args else '?')} is missing"
    return f"unreadable entry ({type(error).__name__}: {str(error)[:MAX_SHOWN]})"


# -- the checks --------------------------------------------------------------------------------


def service_name_problem(name: Any) -> str | None:
    """Why ``name`` cannot be a service name, or None if it can."""
    if isinstance(name, str) and SERVICE_NAME.match(name):
        return None
    try:
        _check_text("service", name, "service name")
    except InvalidInstance as exc:
        return exc.reason
    if not SERVICE_NAME.match(name):
        return (
            f"service name {show(name)} is not 1-{MAX_NAME_LENGTH} letters, digits and ._:@- "
            "starting with a letter or digit (without @@)"
        )
    return None


def check_host(host: Any) -> None:
    problem = host_problem(host)
    if problem is None:
        return
    if isinstance(host, str):
        _check_text("host", host)  # NUL and lone surrogates said as such
    raise InvalidInstance("host", f"host {problem}")


def check_instance(instance: RegistryInstance) -> None:
    """Raise :class:`InvalidInstance` (the first problem found) unless ``instance`` can be
    stored and shown as it is."""
    problem = service_name_problem(instance.service)
    if problem:
        raise InvalidInstance("service", problem)
    check_host(instance.host)
    if port_problem(instance.port):
        raise InvalidInstance("port", f"port {show(instance.port)} is not between 1 and 65535")
    problem = weight_problem(instance.weight)
    if problem:
        raise InvalidInstance("weight", f"weight {problem}")
    for field in ("healthy", "enabled"):
        if not isinstance(getattr(instance, field), bool):
            raise InvalidInstance(field, f"{field} {show(getattr(instance, field))} is not a bool")
    if not isinstance(instance.cluster, str) or not CLUSTER.match(instance.cluster):
        _check_text("cluster", instance.cluster)
        raise InvalidInstance(
            "cluster",
            f"cluster {show(instance.cluster)} is not 1-{MAX_CLUSTER_LENGTH} letters, digits "
            "and ._:-",
        )
    if not isinstance(instance.status, str):
        raise InvalidInstance("status", f"status {show(instance.status)} is not text")
    check_metadata(instance.metadata)
    if not isinstance(instance.instance_id, str) or not INSTANCE_ID.match(instance.instance_id):
        _check_text("instance_id", instance.instance_id, "instance id")
        raise InvalidInstance(
            "instance_id",
            f"instance id {show(instance.instance_id)} is not 1-{MAX_NAME_LENGTH} letters, "
            "digits and ._:@#+=-",
        )


def check_metadata(metadata: Any) -> None:
    if not isinstance(metadata, dict):
        raise InvalidInstance("metadata", f"metadata is {type(metadata).__name__}, not an object")
    if len(metadata) > MAX_METADATA_KEYS:
        raise InvalidInstance("metadata", _too_many_keys(len(metadata)))
    text = ""
    try:  # all at once; one by one only to say what is wrong
        text = "".join(chain.from_iterable(metadata.items()))
        text.encode("utf-8")
        fine = "\x00" not in text
    except (TypeError, UnicodeEncodeError):
        fine = False
    if not fine:
        for key, value in metadata.items():
            _check_text("metadata", key, "metadata key")
            _check_text("metadata", value, f"metadata value of {show(key)}")
    # json.dumps makes at most 12 characters of one (a surrogate pair escaped), and adds 6 per
    # entry: measure exactly only when the text could be too long.
    if (len(text) * 12 + 6 * len(metadata) + 2) > MAX_METADATA_BYTES:
        size = len(json.dumps(metadata, separators=(",", ":")))
        if size > MAX_METADATA_BYTES:
            raise InvalidInstance(
                "metadata",
                f"metadata is {size} bytes as JSON (at most {MAX_METADATA_BYTES})",
            )


def _too_many_keys(count: int) -> str:
    return f"metadata has {count} keys (at most {MAX_METADATA_KEYS})"


# -- a whole listing ---------------------------------------------------------------------------


@dataclass
class Screened:
    instances: list[RegistryInstance]
    skipped: list[SkippedInstance]


def screen(service: str, entries: Iterable[RegistryInstance | SkippedInstance]) -> Screened:
    """Split one service's listing into what can be synced and what is skipped (with why).
    A service whose name is refused is skipped whole, its entries unread."""
    problem = service_name_problem(service)
    if problem:
        return Screened([], [SkippedInstance(service, None, f"{problem}; service not read")])
    result = Screened([], [])
    ids: set[str] = set()
    for entry in entries:
        if isinstance(entry, SkippedInstance):
            result.skipped.append(entry)
            continue
        try:
            check_instance(entry)
        except InvalidInstance as exc:
            result.skipped.append(skipped(service, entry.instance_id, exc))
            continue
        if entry.instance_id in ids:
            reason = f"instance id {show(entry.instance_id)} listed twice; the first one is synced"
            result.skipped.append(SkippedInstance(service, entry.instance_id, reason))
            continue
        ids.add(entry.instance_id)
        result.instances.append(entry)
    return result


def report(skipped: list[SkippedInstance], limit: int = 2000) -> str:
    """``last_error`` of a registry whose sync skipped these (empty if none), at most
    ``limit`` characters: as many entries as fit, then how many more there are."""
    if not skipped:
        return ""
    count = len(skipped)
    head = f"Skipped {count} invalid instance{'s' if count != 1 else ''} (the others synced): "
    parts: list[str] = []
    used = len(head)
    for n, entry in enumerate(skipped):
        part = describe(entry)
        more = f"… and {count - n} more"
        if used + len(part) + 2 + len(more) > limit:
            parts.append(more)
            break
        parts.append(part)
        used += len(part) + 2
    return head + "; ".join(parts)
