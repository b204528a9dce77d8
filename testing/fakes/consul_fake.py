"""contract fake: not Consul. It serves the documented Consul HTTP API endpoints Graylane uses
and nothing more.

Test code only. ``FakeConsul`` is one Consul agent (of node ``agent_node``, datacenter
``datacenter``) with the catalog of its cluster in memory, behind a real HTTP server on
127.0.0.1, answering as HashiCorp's API docs say (catalog, health, agent/service,
features/blocking, ACLs):

* ``GET /v1/catalog/services``: ``{name: [tags]}``; ``GET /v1/health/service/<name>``: entries
  ``{Node, Service, Checks}``, the node's ``serfHealth`` check included; ``GET
  /v1/health/state/any``: every check; ``GET /v1/agent/self``: ``Config.NodeName``/``Datacenter``.
* ``PUT /v1/agent/service/maintenance/<ID>?enable=true|false&reason=``: only for a service
  registered on this agent's node (else 404 "Unknown service ID"); maintenance is the critical
  check ``_service_maintenance:<ID>`` with the reason as its Notes.
* Indexes: one Raft-like index grows with every write. ``catalog/services`` answers the index of
  the last registration change, ``health/state/any`` that of the last check change, and
  ``health/service/<name>`` that of the last change to that service (``X-Consul-Index``).
* Blocking queries: with ``?index=N`` the answer waits until that index passes N, or ``wait``
  (``10s``, ``100ms``, ``5m``; default 5 minutes, at most 10) has passed.
* ``?dc=`` other than the agent's datacenter: 500 "No path to datacenter".
* With ``token`` set, ACLs are on (default policy deny): ``X-Consul-Token`` must be that token.
  An unknown token gets 403 "ACL not found"; no token is the anonymous one, whose reads are
  filtered to nothing (``X-Consul-Results-Filtered-By-ACLs: true``) and whose writes and agent
  reads get 403 "Permission denied".
* The outage switches are the base's (``fail_with``, ``delay``, ``stop``); ``fail_with`` also
  ends the queries that are blocked, with the failure.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .http_fake import FakeHTTPServer, FakeRequest, FakeResponse, json_reply, text_reply

MAINTENANCE = "_service_maintenance:"
DEFAULT_WAIT = 300.0
MAX_WAIT = 600.0
WAIT = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)\Z")
UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


@dataclass
class _Registration:
    node: str
    node_address: str
    service: dict[str, Any]
    checks: list[dict[str, Any]] = field(default_factory=list)


class FakeConsul(FakeHTTPServer):
    """One Consul agent and its cluster's catalog; see the module docstring."""

    def __init__(
        self, *, agent_node: str = "node-1", datacenter: str = "dc1", token: str | None = None
    ):
        super().__init__()
        self.agent_node = agent_node
        self.datacenter = datacenter
        self.token = token
        self.nodes: dict[str, str] = {agent_node: "10.0.9.1"}  # node -> address
        self.registrations: dict[tuple[str, str], _Registration] = {}  # (node, ID) ->
        self.index = 1
        self.services_index = 1
        self.checks_index = 1
        self.service_index: dict[str, int] = {}
        self._changed = threading.Condition(self.lock)

    # -- test helpers (each is one write: the index grows) ------------------------------

    def register(
        self,
        name: str,
        address: str,
        port: int,
        *,
        service_id: str | None = None,
        node: str | None = None,
        meta: dict[str, str] | None = None,
        tags: list[str] | None = None,
        weight: int = 1,
        check_status: str | None = "passing",
    ) -> str:
        """Register (or re-register) an instance, with one service check unless
        ``check_status`` is None; its Graylane instance id (``<ID>@<node>``)."""
        node = node or self.agent_node
        service_id = service_id or name
        with self.lock:
            self.nodes.setdefault(node, f"10.0.9.{len(self.nodes) + 1}")
            previous = self.registrations.get((node, service_id))
            # A re-registration keeps maintenance (the agent persists it).
            kept = previous.checks if previous else []
            checks = [c for c in kept if c["CheckID"].startswith(MAINTENANCE)]
            if check_status is not None:
                checks.append(
                    self._check(node, name, service_id, f"service:{service_id}", check_status)
                )
            self.registrations[(node, service_id)] = _Registration(
                node=node,
                node_address=self.nodes[node],
                service={
                    "ID": service_id,
                    "Service": name,
                    "Tags": list(tags or []),
                    "Address": address,
                    "Port": port,
                    "Meta": dict(meta or {}),
                    "Weights": {"Passing": weight, "Warning": 1},
                },
                checks=checks,
            )
            self._write(name, services=True, checks=check_status is not None)
        return f"{service_id}@{node}"

    def deregister(self, name: str, service_id: str | None = None, node: str | None = None) -> None:
        with self.lock:
            del self.registrations[(node or self.agent_node, service_id or name)]
            self._write(name, services=True, checks=True)

    def set_check(
        self, name: str, status: str, *, service_id: str | None = None, node: str | None = None
    ) -> None:
        """Set the status of the instance's service check (passing/warning/critical)."""
        service_id = service_id or name
        with self.lock:
            registration = self.registrations[(node or self.agent_node, service_id)]
            for check in registration.checks:
                if check["CheckID"] == f"service:{service_id}":
                    check["Status"] = status
            self._write(name, checks=True)

    def set_maintenance(
        self, service_id: str, enabled: bool, *, reason: str = "", node: str | None = None
    ) -> None:
        """``consul maint -service=<ID>`` run on ``node`` (default: this agent's)."""
        node = node or self.agent_node
        with self.lock:
            registration = self.registrations[(node, service_id)]
            check_id = MAINTENANCE + service_id
            name = registration.service["Service"]
            registration.checks = [c for c in registration.checks if c["CheckID"] != check_id]
            if enabled:
                registration.checks.append(
                    self._check(node, name, service_id, check_id, "critical", reason)
                )
            self._write(name, checks=True)

    def in_maintenance(self, service_id: str, node: str | None = None) -> bool:
        with self.lock:
            registration = self.registrations[(node or self.agent_node, service_id)]
            return any(c["CheckID"] == MAINTENANCE + service_id for c in registration.checks)

    # -- state ------------------------------------------------------------------------------

    def _check(
        self, node: str, name: str, service_id: str, check_id: str, status: str, notes: str = ""
    ) -> dict[str, Any]:
        return {
            "Node": node,
            "CheckID": check_id,
            "Name": "Service Maintenance Mode" if check_id.startswith(MAINTENANCE) else check_id,
            "Status": status,
            "Notes": notes,
            "Output": "",
            "ServiceID": service_id,
            "ServiceName": name,
            "ModifyIndex": self.index + 1,
        }

    def _write(self, name: str, *, services: bool = False, checks: bool = False) -> None:
        self.index += 1
        if services:
            self.services_index = self.index
        if checks:
            self.checks_index = self.index
        self.service_index[name] = self.index
        self._changed.notify_all()

    def _serf_check(self, node: str) -> dict[str, Any]:
        return {
            "Node": node,
            "CheckID": "serfHealth",
            "Name": "Serf Health Status",
            "Status": "passing",
            "Notes": "",
            "Output": "Agent alive and reachable",
            "ServiceID": "",
            "ServiceName": "",
        }

    # -- serving ----------------------------------------------------------------------------

    def fail_with(
        self, status: int | None, body: str = "fake outage", *, json_body: Any = None
    ) -> None:
        """As the base's, and blocked queries end with the failure too (a Consul that loses
        its leader fails them)."""
        super().fail_with(status, body, json_body=json_body)
        with self.lock:
            self._changed.notify_all()

    def stop(self) -> None:
        with self.lock:
            self._changed.notify_all()  # blocked queries end (the server hangs up on them)
        super().stop()

    def handle(self, request: FakeRequest) -> FakeResponse:
        given = request.header("X-Consul-Token")
        anonymous = self.token is not None and not given
        if self.token is not None and given and given != self.token:
            return text_reply("ACL not found", 403)
        dc = request.params.get("dc")
        if dc and dc != self.datacenter:
            return text_reply("No path to datacenter", 500)
        path = request.path
        if request.method == "PUT" and path.startswith("/v1/agent/service/maintenance/"):
            if anonymous:
                return text_reply(
                    "Permission denied: anonymous token lacks permission 'service:write'", 403
                )
            return self._maintenance(path.rsplit("/", 1)[1], request.params)
        if request.method != "GET":
            return text_reply("method not allowed", 405)
        if path == "/v1/agent/self":
            if anonymous:
                return text_reply(
                    "Permission denied: anonymous token lacks permission 'agent:read'", 403
                )
            return json_reply(
                {"Config": {"NodeName": self.agent_node, "Datacenter": self.datacenter}}
            )
        if path == "/v1/catalog/services":
            return self._blocking(request, lambda: self.services_index, self._services, anonymous)
        if path == "/v1/health/state/any":
            return self._blocking(request, lambda: self.checks_index, self._all_checks, anonymous)
        if path.startswith("/v1/health/service/"):
            name = path.removeprefix("/v1/health/service/")
            return self._blocking(
                request,
                lambda: self.service_index.get(name, self.services_index),
                lambda: self._entries(name),
                anonymous,
            )
        return text_reply("Not Found", 404)

    def _blocking(
        self,
        request: FakeRequest,
        index_of: Callable[[], int],
        body_of: Callable[[], Any],
        anonymous: bool,
    ) -> FakeResponse:
        """Wait (releasing the lock) until the endpoint's index passes ``?index``, or the wait
        is over; then answer with the current body and index."""
        if "index" in request.params:
            since = int(request.params["index"])
            deadline = time.monotonic() + _wait_seconds(request.params.get("wait"))
            while index_of() <= since and not self._stopping.is_set():
                if self._fail is not None:
                    return self._fail[1]
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._changed.wait(min(left, 0.05))
        headers = {"X-Consul-Index": str(index_of())}
        body = body_of()
        if anonymous:
            headers["X-Consul-Results-Filtered-By-ACLs"] = "true"
            body = type(body)()
        return json_reply(body, headers=headers)

    def _services(self) -> dict[str, list[str]]:
        services: dict[str, set[str]] = {}
        for registration in self.registrations.values():
            name = registration.service["Service"]
            services.setdefault(name, set()).update(registration.service["Tags"])
        return {name: sorted(tags) for name, tags in sorted(services.items())}

    def _entries(self, name: str) -> list[dict[str, Any]]:
        return [
            {
                "Node": {"Node": r.node, "Address": r.node_address, "Datacenter": self.datacenter},
                "Service": dict(r.service),
                "Checks": [self._serf_check(r.node), *r.checks],
            }
            for r in self.registrations.values()
            if r.service["Service"] == name
        ]

    def _all_checks(self) -> list[dict[str, Any]]:
        return [check for r in self.registrations.values() for check in r.checks]

    def _maintenance(self, service_id: str, params: dict[str, str]) -> FakeResponse:
        if (self.agent_node, service_id) not in self.registrations:
            return text_reply(f'Unknown service ID "{service_id}"', 404)
        enable = params.get("enable")
        if enable not in ("true", "false"):
            return text_reply("Missing value for enable", 400)
        self.set_maintenance(service_id, enable == "true", reason=params.get("reason", ""))
        return FakeResponse(200, b"", "")


def _wait_seconds(raw: str | None) -> float:
    if not raw:
        return DEFAULT_WAIT
    match = WAIT.match(raw)
    if not match:
        return DEFAULT_WAIT
    return min(float(match.group(1)) * UNITS[match.group(2)], MAX_WAIT)
