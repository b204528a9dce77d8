"""The small interface every registry adapter implements (plain Python, no Django).

A sync pass calls ``list_services()`` once, then ``list_instances(service)`` for each service, and
``set_enabled(instance, False/True)`` to take one instance out of traffic or put it back. An
adapter whose registry has no such switch (Kubernetes) sets ``disables_in_registry = False``:
its ``set_enabled`` does nothing, and the sync keeps an operator's offline without re-applying.
Every failure that is the registry's fault (unreachable, timeout, auth, unexpected answer) is a
:class:`RegistryError` with a message an operator can read.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

DEFAULT_NAMESPACE = "public"
DEFAULT_GROUP = "DEFAULT_GROUP"
DEFAULT_CLUSTER = "DEFAULT"
# The status of an instance on its way out that still finishes what it was sent (Kubernetes:
# an endpoint whose Pod is terminating); shown as DRAINING and never routed to.
TERMINATING = "TERMINATING"


@dataclass(frozen=True, slots=True)
class RegistryInstance:
    """One instance of one service as the registry reports it."""

    service: str  # plain service name (no group@@ prefix; lower-case for Eureka)
    instance_id: str  # Nacos instanceId (built as ip#port#cluster#group@@service if absent)
    host: str
    port: int
    weight: float
    healthy: bool
    enabled: bool  # False = taken out of traffic (Nacos enabled=false, Eureka OUT_OF_SERVICE)
    metadata: dict[str, str] = field(default_factory=dict)
    cluster: str = DEFAULT_CLUSTER
    status: str = "UP"  # Eureka: raw; Nacos: "UP" if healthy else "DOWN"; Kubernetes: see there

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass(frozen=True, slots=True)
class SkippedInstance:
    """An entry of a listing that cannot be synced, and why (adapters/validation.py decides).
    ``instance_id`` is the id the registry gave it when that id is text, else None."""

    service: str
    instance_id: str | None
    reason: str


class RegistryError(Exception):
    """Registry unreachable, timed out, auth failed, or answered something unexpected.

    ``str(error)`` is human-readable (shown to operators) and names the URL and HTTP status.
    ``url`` and ``status`` are also kept as attributes (``status`` is None when no HTTP answer
    arrived: timeout, connection refused, DNS failure).
    """

    def __init__(self, message: str, *, url: str | None = None, status: int | None = None):
        super().__init__(message)
        self.url = url
        self.status = status


@runtime_checkable
class RegistryAdapter(Protocol):
    @property
    def lists_disabled(self) -> bool:
        """True if ``list_instances`` shows disabled instances too. When False, an instance
        missing from a listing may be gone *or* only disabled: do not treat absence as gone."""
        ...

    def list_services(self) -> list[str]: ...

    def list_instances(self, service: str) -> Sequence[RegistryInstance | SkippedInstance]:
        """Instances of one service; includes DISABLED instances wherever the server can show
        them (see the adapter's ``lists_disabled``). An unknown service gives ``[]``. An entry
        the adapter cannot read is a ``SkippedInstance`` (never an error for the whole
        listing); the sync checks the others with ``validation.screen``."""
        ...

    def set_enabled(self, instance: RegistryInstance, enabled: bool) -> None:
        """Take ``instance`` out of traffic (False) or put it back (True)."""
        ...

    def close(self) -> None: ...


ADAPTER_KINDS = ("nacos", "eureka", "kubernetes", "consul")
