"""What a Kubernetes registry remembers between sync passes: per API server and namespace, the
EndpointSlices last seen, the resourceVersion to resume the watch from, and the labels of the
Pods behind them (plain Python, no Django).

A sync pass builds a new adapter (registry_sync/registries.py), so this lives in the process:
the next pass of the same worker resumes the watch where the last one stopped. A pass in
another worker process, or after a restart, finds nothing and lists again: slower, never wrong.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any


@dataclass
class NamespaceWatch:
    # None: list again before watching (never listed, or the server said 410 Gone)
    resource_version: str | None = None
    slices: dict[str, dict[str, Any]] = field(default_factory=dict)  # by slice name
    pod_labels: dict[str, dict[str, str]] = field(default_factory=dict)  # by pod uid

    def forget(self) -> None:
        """The server no longer has the history since ``resource_version``: list again, and
        read the Pods again too (their labels may have changed meanwhile)."""
        self.resource_version = None
        self.slices.clear()
        self.pod_labels.clear()


class WatchStore:
    """The watches of one process (``PROCESS_WATCHES``), by (API server URL, namespace)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._watches: dict[tuple[str, str], NamespaceWatch] = {}

    def of(self, server: str, namespace: str) -> NamespaceWatch:
        with self._lock:
            return self._watches.setdefault((server, namespace), NamespaceWatch())

    def clear(self) -> None:
        with self._lock:
            self._watches.clear()


PROCESS_WATCHES = WatchStore()
