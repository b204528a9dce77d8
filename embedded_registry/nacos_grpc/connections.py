"""The Nacos 2.x clients connected to this process: what each registered (its instances live
as long as its connection, as in Nacos 2.x) and subscribed to (what it is pushed).

A connection is one HTTP/2 connection, known by its peer address: a client's unary requests
and its bi-directional stream travel on it, so a request is bound to the stream opened by
the same client. The stream ending (the client closes, its process dies, keepalive gives up)
deregisters its instances through naming.deregister, audited under the user who registered
them. While it is open, this process renews them every naming.BEAT_INTERVAL_MS, as an HTTP
client's beat would: if the process itself dies, its clients' instances expire by their
heartbeat timeout like any other (and the clients reconnect to another replica and register
again)."""

import itertools
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.db import close_old_connections

from embedded_registry import naming
from embedded_registry.changes import ServiceKey
from embedded_registry.naming import InstanceKey

log = logging.getLogger(__name__)

Send = Callable[[str, dict[str, Any]], None]


@dataclass
class Connection:
    id: str
    peer: str
    client_ip: str
    send: Send
    # instance -> the user who registered it (the actor of its deregistration)
    instances: dict[InstanceKey, str] = field(default_factory=dict)
    # service -> the cluster selections subscribed to ("" is every cluster)
    subscriptions: dict[ServiceKey, set[str]] = field(default_factory=dict)


class Connections:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_peer: dict[str, Connection] = {}
        self._push_ids = itertools.count(1)

    def open(self, connection: Connection) -> None:
        with self._lock:
            self._by_peer[connection.peer] = connection

    def of(self, peer: str) -> Connection | None:
        with self._lock:
            return self._by_peer.get(peer)

    def all(self) -> list[Connection]:
        with self._lock:
            return list(self._by_peer.values())

    def close(self, connection: Connection) -> None:
        """The stream ended: its instances go (each one audited, and pushed to
        subscribers as any deregistration is)."""
        with self._lock:
            if self._by_peer.get(connection.peer) is connection:
                del self._by_peer[connection.peer]
            owned, connection.instances = dict(connection.instances), {}
        for key, actor in owned.items():
            try:
                naming.deregister(key, actor=actor)
            except Exception:  # the rest still go; this one expires by its timeout
                log.exception(
                    "Could not deregister %s of closed connection %s.", key, connection.id
                )

    def owns(self, connection: Connection, key: InstanceKey, actor: str) -> None:
        with self._lock:
            connection.instances[key] = actor

    def disowns(self, connection: Connection, key: InstanceKey) -> None:
        with self._lock:
            connection.instances.pop(key, None)

    def owned(self, connection: Connection, service: ServiceKey) -> list[InstanceKey]:
        with self._lock:
            return [
                key
                for key in connection.instances
                if (key.namespace, key.group, key.service)
                == (service.namespace, service.group, service.service)
            ]

    def subscribe(self, connection: Connection, service: ServiceKey, clusters: str) -> None:
        with self._lock:
            connection.subscriptions.setdefault(service, set()).add(clusters)

    def unsubscribe(self, connection: Connection, service: ServiceKey, clusters: str) -> None:
        with self._lock:
            selections = connection.subscriptions.get(service, set())
            selections.discard(clusters)
            if not selections:
                connection.subscriptions.pop(service, None)

    def subscribed(self) -> set[ServiceKey]:
        """The services this process's connections subscribe to."""
        with self._lock:
            return {
                key for connection in self._by_peer.values() for key in connection.subscriptions
            }

    def renew(self) -> None:
        """One round of beats for the instances of every open connection."""
        for connection in self.all():
            with self._lock:
                keys = list(connection.instances)
            for key in keys:
                if not naming.beat(key, None):
                    # Deleted meanwhile (an operator, or expired while this process was
                    # stalled): the client's redo re-registers on its next reconnect.
                    self.disowns(connection, key)

    def push(self, service: ServiceKey | None, service_info: Callable[..., dict]) -> None:
        """NotifySubscriberRequest to this process's subscribers of `service` (None: of
        every service), with what `service_info(service, clusters)` shows now."""
        close_old_connections()
        try:
            for connection in self.all():
                with self._lock:
                    targets = [
                        (key, clusters)
                        for key, selections in connection.subscriptions.items()
                        if service is None or key == service
                        for clusters in selections
                    ]
                for key, clusters in targets:
                    connection.send(
                        "NotifySubscriberRequest",
                        {
                            "headers": {},
                            "requestId": str(next(self._push_ids)),
                            "module": "naming",
                            "namespace": key.namespace,
                            "serviceName": key.service,
                            "groupName": key.group,
                            "serviceInfo": service_info(key, clusters),
                        },
                    )
        finally:
            close_old_connections()
