"""The records of a gateway document, and the one set of rules for which of them can be used.

Every reader of routing data applies these rules, so that one bad record costs that record
and never a whole document: the dashboard builds documents with nothing they refuse
(gateways/gateway_document.py, registry_sync's screening of registry entries), and the Python
gateway, the agent (Envoy, nginx) and the SDK balancer apply the valid part of what they get
and list the rest (`Skipped`) in their ack.

A record is

* an instance, `{"id", "host", "port", "version", "weight"}`. A bad id, host, port or weight
  skips the instance. A `version` that is not usable (null, missing, empty, not text,
  control characters, longer than MAX_VERSION_LENGTH) makes it an instance without a
  version: it takes `ALL` traffic and is never picked for `PROD` or `GRAY`, as in the
  reference design's balancer. `null` is how the dashboard says "no version"; any other
  unusable value is reported.
* a service entry, `{"prod", "gray", "instances", "percent", "targeted", "quarantined"}`
  under its name. A bad name, `prod`, `gray` or instance list skips the whole entry (the
  reader keeps the entry in force for that service, if it has one); a bad `percent` or
  `targeted` skips that override only (the policy's applies); a bad `quarantined` (the
  versions that take no traffic) skips that list only: the dashboard leaves their instances
  out of `instances` anyway.

Plain Python, like the rest of routing_engine.
"""

from __future__ import annotations

import ipaddress
import math
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from .policy import (
    MAX_ENTRY_LENGTH,
    SERVICE_ROUTING_FIELDS,
    PolicyError,
    has_control_characters,
    normalize_service_routing,
)

# Instance.version's column in the dashboard; a registry's longer value is no version.
MAX_VERSION_LENGTH = 64
MAX_HOST_LENGTH = 253  # a DNS name
MAX_ID_LENGTH = 255
MAX_WEIGHT = 10000.0  # Nacos: "The weights range from 0.0 to 10000.0"
MAX_SHOWN = 60  # characters of a bad value quoted in a reason

# A service name (also a URL path segment of the gateways, the pages and the API): Nacos'
# characters, a letter or digit first, no "@@" (Nacos' group separator).
SERVICE_NAME = re.compile(r"[A-Za-z0-9](?:(?!@@)[A-Za-z0-9._:@-]){0,254}\Z")
_HOST_LABEL = r"[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?"
HOSTNAME = re.compile(rf"{_HOST_LABEL}(?:\.{_HOST_LABEL})*\.?\Z")
_DOTTED_NUMBERS = re.compile(r"[0-9.]+\Z")
_OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
IPV4 = re.compile(rf"{_OCTET}(?:\.{_OCTET}){{3}}\Z")  # what ipaddress accepts, faster


def show(value: Any) -> str:
    """A value quoted for a message: repr (so NULs, control characters and lone surrogates
    are escaped), shortened."""
    text = repr(value)
    return text if len(text) <= MAX_SHOWN else text[: MAX_SHOWN - 1] + "…"


@dataclass(frozen=True, slots=True)
class Skipped:
    """One record a reader did not apply (or applied only in part), and why."""

    record: str  # e.g. "services.user-app.instances[10.0.0.5#7201#DEFAULT#user-app]"
    reason: str  # e.g. "port: 0 is not a port"

    def as_json(self) -> dict[str, str]:
        return {"record": self.record, "reason": self.reason}


@dataclass(frozen=True, slots=True)
class Instance(Mapping):
    """A usable instance record. The balancer reads instances as mappings (with no "state":
    all listed are routable)."""

    id: str
    host: str
    port: int
    version: str | None  # None: takes ALL traffic only
    weight: float
    # Made once, not per request: a gateway reads them several times for each it proxies.
    address: tuple[str, int] = field(init=False, repr=False, compare=False)
    label: str = field(init=False, repr=False, compare=False)  # "host:port"

    def __post_init__(self) -> None:
        object.__setattr__(self, "address", (self.host, self.port))
        object.__setattr__(self, "label", f"{self.host}:{self.port}")

    def __getitem__(self, key: str) -> Any:
        try:
            return getattr(self, key)
        except AttributeError:
            raise KeyError(key) from None

    def __iter__(self) -> Iterator[str]:
        return iter(("id", "host", "port", "version", "weight"))

    def __len__(self) -> int:
        return 5

    def get(self, key: str, default: Any = None) -> Any:
        # The balancer calls this for every candidate of every request: no KeyError detour.
        return getattr(self, key, default)


@dataclass(slots=True)
class ServiceEntry:
    """A usable service entry: its versions, its usable instances, its routing override."""

    name: str
    prod: str
    gray: str
    instances: list[Instance]
    # `percent`, `targeted`, `mirror` if set
    routing: dict[str, Any] = field(default_factory=dict)
    # Versions that take no traffic at all, whatever a request's flag or lane.
    quarantined: frozenset[str] = frozenset()


@dataclass
class Services:
    """What `read_services` makes of a document's `services`: the usable entries, the
    entries skipped whole (name -> why), and the records skipped within usable entries."""

    entries: dict[str, ServiceEntry] = field(default_factory=dict)
    unusable: dict[str, Skipped] = field(default_factory=dict)
    skipped: list[Skipped] = field(default_factory=list)


class RecordError(ValueError):
    """A record that cannot be used; the message is the reason."""


# -- single values ----------------------------------------------------------------------------


def version_problem(value: Any, max_length: int = MAX_VERSION_LENGTH) -> str | None:
    """Why `value` is not a version (None when it is one, stripped)."""
    if not isinstance(value, str):
        return f"{show(value)} is not text"
    text = value.strip()
    if not text:
        return f"{show(value)} is empty"
    if has_control_characters(text):
        return f"{show(value)} contains control characters"
    if len(text) > max_length:
        return f"{show(value)} is longer than {max_length} characters"
    return None


def usable_version(value: Any) -> str | None:
    """An instance's version (stripped), or None when `value` is not a usable one."""
    return None if version_problem(value) else value.strip()


def host_problem(host: Any) -> str | None:
    """Why `host` is not an IP address or host name an instance can be reached at."""
    if isinstance(host, str):
        if IPV4.match(host):
            return None
        if (
            len(host) <= MAX_HOST_LENGTH
            and HOSTNAME.match(host)
            and not _DOTTED_NUMBERS.match(host)
        ):
            return None
    if not isinstance(host, str):
        return f"{show(host)} is not text"
    if len(host) > MAX_HOST_LENGTH:
        return f"{show(host)} is over {MAX_HOST_LENGTH} characters"
    if ":" in host:
        if "%" in host:
            # It names a network interface of the instance's own machine: no other machine
            # (no gateway) can reach it by that address.
            return f"{show(host)} has a zone index"
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            return f"{show(host)} is not an IPv6 address"
        return None
    if _DOTTED_NUMBERS.match(host):
        return f"{show(host)} is not an IPv4 address"
    return f"{show(host)} is not an IP address or host name"


def port_problem(port: Any) -> str | None:
    if isinstance(port, int) and not isinstance(port, bool) and 1 <= port <= 65535:
        return None
    return f"{show(port)} is not a port"


def weight_problem(weight: Any) -> str | None:
    if (
        isinstance(weight, int | float)
        and not isinstance(weight, bool)
        and math.isfinite(weight)
        and 0.0 <= weight <= MAX_WEIGHT
    ):
        return None
    return f"{show(weight)} is not a number from 0 to {MAX_WEIGHT:g}"


def service_name_problem(name: Any) -> str | None:
    if isinstance(name, str) and SERVICE_NAME.match(name):
        return None
    return (
        f"{show(name)} is not a service name (1-255 letters, digits and ._:@- starting with "
        "a letter or digit, without @@)"
    )


# -- records ----------------------------------------------------------------------------------


def read_instance(raw: Any) -> tuple[Instance, str | None]:
    """(the instance, why its version was dropped or None); RecordError when it cannot be
    used at all. A missing `id` is "host:port"; a missing `weight` is 1."""
    if not isinstance(raw, Mapping):
        raise RecordError("not an object")
    host, port, weight = raw.get("host"), raw.get("port"), raw.get("weight", 1.0)
    for name, problem in (
        ("host", host_problem(host)),
        ("port", port_problem(port)),
        ("weight", weight_problem(weight)),
    ):
        if problem:
            raise RecordError(f"{name}: {problem}")
    instance_id = raw.get("id")
    if instance_id is None:
        instance_id = f"{host}:{port}"
    elif not isinstance(instance_id, str) or not instance_id or len(instance_id) > MAX_ID_LENGTH:
        raise RecordError(f"id: {show(instance_id)} is not an instance id")
    version = raw.get("version")
    problem = None if version is None else version_problem(version)
    instance = Instance(
        id=instance_id,
        host=cast(str, host),
        port=cast(int, port),
        version=None if version is None or problem else version.strip(),
        weight=float(weight),
    )
    return instance, problem


def read_instances(where: str, raw: Iterable[Any]) -> tuple[list[Instance], list[Skipped]]:
    """The usable instances of a list (`where` names it in the records, e.g.
    "services.user-app"), and what was skipped. An id listed twice: the first is used."""
    instances: list[Instance] = []
    skipped: list[Skipped] = []
    seen: set[str] = set()
    for index, item in enumerate(raw):
        label = item.get("id") if isinstance(item, Mapping) else None
        readable = isinstance(label, str) and 0 < len(label) <= MAX_ID_LENGTH
        record = f"{where}.instances[{label if readable else index}]"
        try:
            instance, version_dropped = read_instance(item)
        except RecordError as exc:
            skipped.append(Skipped(record, str(exc)))
            continue
        if instance.id in seen:
            skipped.append(Skipped(record, "id: listed twice; the first one is used"))
            continue
        seen.add(instance.id)
        if version_dropped:
            reason = f"version: {version_dropped}; it takes ALL traffic only"
            skipped.append(Skipped(f"{record}.version", reason))
        instances.append(instance)
    return instances, skipped


def _service_entry(name: str, raw: Any, skipped: list[Skipped]) -> ServiceEntry:
    """The entry of one service, RecordError when it cannot be used at all."""
    problem = service_name_problem(name)
    if problem:
        raise RecordError(problem)
    if not isinstance(raw, Mapping):
        raise RecordError("not an object")
    versions = []
    for key in ("prod", "gray"):
        problem = version_problem(raw.get(key), MAX_ENTRY_LENGTH)
        if problem:
            raise RecordError(f"{key}: {problem}")
        versions.append(raw[key].strip())
    listed = raw.get("instances", [])
    if not isinstance(listed, list):
        raise RecordError(f"instances: {type(listed).__name__}, not a list")
    where = f"services.{name}"
    instances, bad = read_instances(where, listed)
    skipped += bad
    routing: dict[str, Any] = {}
    for key in SERVICE_ROUTING_FIELDS:
        if key not in raw:
            continue
        try:
            routing.update(normalize_service_routing({key: raw[key]}))
        except PolicyError as exc:
            inherited = {
                "percent": "the policy's percent applies",
                "targeted": "the policy's rules apply to it",
                "mirror": "nothing is mirrored",
            }[key]
            message = "; ".join(exc.errors.get(key, [str(exc)]))
            skipped.append(Skipped(f"{where}.{key}", f"{message} ({inherited})"))
    quarantined: frozenset[str] = frozenset()
    if "quarantined" in raw:
        try:
            quarantined = read_quarantined(raw["quarantined"])
        except RecordError as exc:
            reason = f"{exc}; ignored (the document leaves out their instances all the same)"
            skipped.append(Skipped(f"{where}.quarantined", reason))
    return ServiceEntry(name, versions[0], versions[1], instances, routing, quarantined)


def read_quarantined(raw: Any) -> frozenset[str]:
    """A service entry's `quarantined`: a list of versions; RecordError when it is not."""
    if not isinstance(raw, list):
        raise RecordError(f"{show(raw)} is not a list of versions")
    for version in raw:
        problem = version_problem(version)
        if problem:
            raise RecordError(f"{problem}, not a version")
    return frozenset(version.strip() for version in raw)


def read_services(raw: Mapping[Any, Any]) -> Services:
    """The usable part of a document's `services` object."""
    result = Services()
    for name, entry in raw.items():
        skipped: list[Skipped] = []
        try:
            result.entries[name] = _service_entry(name, entry, skipped)
        except RecordError as exc:
            shown = name if service_name_problem(name) is None else show(name)
            result.unusable[name] = Skipped(f"services.{shown}", str(exc))
            continue
        result.skipped += skipped
    return result
