"""HashiCorp Consul adapter over the HTTP API (catalog, health, agent).

Endpoints and semantics as documented by HashiCorp (API docs: catalog, health, agent/service,
features/blocking):

* ``GET /v1/catalog/services`` lists the service names (with their tags).
* ``GET /v1/health/service/<name>`` lists a service's instances, each an entry
  ``{Node, Service{ID, Service, Address, Port, Meta, Tags, Weights}, Checks[...]}`` whose
  checks include the node's own (``serfHealth``): a node that fails takes its instances down.
* Every instance is an agent's registration, so its ``ID`` is unique on its node only (it
  defaults to the service name); Graylane's instance id is ``<ID>@<node>``.
* Health: every check ``passing`` -> healthy (status UP); a ``warning`` -> WARNING, a
  ``critical`` -> DOWN, both unhealthy.
* Maintenance mode (``consul maint``, ``PUT /v1/agent/service/maintenance/<ID>``) is a critical
  check ``_service_maintenance:<ID>``: such an instance is *disabled* (taken out of traffic), not
  unhealthy. It stays in the health listing, so ``lists_disabled`` is True.
* Version: ``Service.Meta[version_key]`` (default ``version``; Spring Cloud Consul registers
  ``spring.cloud.consul.discovery.metadata`` as Meta). With another key, its value is what
  Graylane reads as ``version``.
* ACL token: the ``X-Consul-Token`` header on every request. A token Consul does not know gets
  403 "ACL not found"; one without the rights, 403 "Permission denied". A read whose results
  Consul filtered by ACLs (``X-Consul-Results-Filtered-By-ACLs: true``: the token may not see
  everything) is an error rather than a short listing: the instances left out would look gone.
* ``datacenter``: the ``dc`` parameter of the catalog and health reads (empty: the agent's).

``set_enabled`` uses the *agent* endpoint, which acts on the agent's own registrations only
(those of the node whose agent ``base_url`` names). An instance on another node is refused
with a RegistryError naming both nodes, before anything is sent: put that node in maintenance
through its own agent (``consul maint -service=<ID>`` there), or point a registry at it.

Why httpx (through http_transport) and not py-consul, the maintained client: the calls must go
through ``outbound.Policy``'s guarded client (checked, pinned addresses; registries are typed
in by admins), which py-consul's own requests session cannot use, and the adapter needs four
endpoints and one header.

Blocking queries: :meth:`ConsulAdapter.wait_for_change` (used by ``registry_sync.consul_watch``)
long-polls one endpoint with ``index``/``wait``; the sync itself reads without blocking.
"""

from __future__ import annotations

import math
import re
from typing import Any, Self
from urllib.parse import quote, urlsplit

import httpx

import outbound

from . import validation
from .base import DEFAULT_CLUSTER, RegistryError, RegistryInstance, SkippedInstance
from .http_transport import HttpTransport

DEFAULT_VERSION_KEY = "version"
MAINTENANCE_CHECK = "_service_maintenance:"
PASSING, WARNING, CRITICAL = "passing", "warning", "critical"
STATUS_OF_CHECK = {PASSING: "UP", WARNING: "WARNING", CRITICAL: "DOWN"}
INDEX_HEADER = "X-Consul-Index"
FILTERED_HEADER = "X-Consul-Results-Filtered-By-ACLs"
TOKEN_HEADER = "X-Consul-Token"
# The endpoints whose index tells that something the sync reads changed: which services exist
# (and their registrations: address, port, Meta), and every check (health, maintenance).
WATCHED = ("/v1/catalog/services", "/v1/health/state/any")
MAX_WAIT = 600.0  # Consul caps a blocking query's wait at 10 minutes
# Consul adds up to wait/16 of jitter to a blocking query; the HTTP timeout leaves room for it.
WAIT_JITTER = 1 / 16
# Datacenter names: what Consul's own config validation accepts.
DATACENTER = re.compile(r"[A-Za-z0-9_-]{1,64}\Z")
# Consul's own servers register as the service "consul": not an application to route.
CONSUL_SERVICE = "consul"


def next_index(previous: int, returned: int) -> int:
    """The index to send next, per the documented client rules for blocking queries: an index
    that went backwards (a snapshot restore, a new leader) starts over from 0, and one that is
    not above 0 (a Consul bug the docs warn of) becomes 1, so the next query still blocks."""
    if returned < previous:
        return 0
    return max(returned, 1)


class ConsulAdapter:
    """Registry adapter for Consul. See the module docstring."""

    kind = "consul"
    lists_disabled = True  # instances in maintenance stay in /v1/health/service

    def __init__(
        self,
        base_url: str,
        *,
        datacenter: str = "",
        token: str = "",
        version_key: str = DEFAULT_VERSION_KEY,
        timeout: float = 3.0,
        policy: outbound.Policy = outbound.DEFAULT_POLICY,
    ):
        url = (base_url or "").strip().rstrip("/")
        parts = urlsplit(url)
        if not parts.scheme or not parts.netloc:
            raise ValueError(f"Consul base_url must look like http://host:8500, got {base_url!r}")
        if datacenter and not DATACENTER.match(datacenter):
            raise ValueError(f"not a Consul datacenter name: {datacenter!r}")
        self.base_url = url
        self.datacenter = datacenter
        self.version_key = version_key or DEFAULT_VERSION_KEY
        self._agent_node: str | None = None
        headers = {TOKEN_HEADER: token} if token else {}
        self._http = HttpTransport("Consul", timeout=timeout, headers=headers, policy=policy)

    # -- public API -------------------------------------------------------------------------

    def list_services(self) -> list[str]:
        response = self._read("/v1/catalog/services", "list services")
        body = self._http.json(response)
        if not isinstance(body, dict):
            raise self._http.error(response, "answered an unexpected shape to list services")
        return sorted(str(name) for name in body if name != CONSUL_SERVICE)

    def list_instances(self, service: str) -> list[RegistryInstance | SkippedInstance]:
        what = f"list instances of {service!r}"
        response = self._read(f"/v1/health/service/{quote(service, safe='')}", what)
        body = self._http.json(response)
        if not isinstance(body, list):
            raise self._http.error(response, f"answered an unexpected shape to {what}")
        return [self._to_instance(entry, service) for entry in body]

    def set_enabled(self, instance: RegistryInstance, enabled: bool) -> None:
        service_id, node = split_instance_id(instance.instance_id)
        agent_node = self._local_node()
        what = f"{'end' if enabled else 'start'} maintenance of {service_id!r} on {node!r}"
        if node != agent_node:
            # Short, and without the URL: it becomes the instance's note, which viewers see.
            raise RegistryError(
                f"Consul: {service_id!r} runs on node {node!r}; only that node's agent can "
                f"put it in maintenance (consul maint -service={service_id} there), and this "
                f"registry's agent is node {agent_node!r}"
            )
        params = {"enable": "false" if enabled else "true"}
        if not enabled:
            params["reason"] = "Taken out of traffic by Graylane"
        response = self._http.send(
            "PUT",
            self._url(f"/v1/agent/service/maintenance/{quote(service_id, safe='')}"),
            params=params,
        )
        if response.status_code == 404:
            raise self._http.error(response, f"cannot {what}: not registered with this agent")
        if not response.is_success:
            raise self._fail(response, what)

    def wait_for_change(self, path: str, index: int, wait: float) -> int:
        """A blocking query on ``path`` (one of WATCHED): returns as soon as its index moves
        past ``index``, or after ``wait`` seconds, with the index to send next
        (:func:`next_index`). ``index`` 0 returns at once with the current index."""
        wait = min(max(wait, 0.0), MAX_WAIT)
        params = {"index": index, "wait": f"{max(1, math.ceil(wait * 1000))}ms"}
        response = self._http.send(
            "GET",
            self._url(path),
            params=self._with_dc(params),
            timeout=self._http.timeout + wait * (1 + WAIT_JITTER),
        )
        self._check(response, f"watch {path}")
        return next_index(index, _index_of(response))

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- helpers ----------------------------------------------------------------------------

    def _url(self, path: str) -> str:
        return self.base_url + path

    def _with_dc(self, params: dict[str, Any]) -> dict[str, Any]:
        return {**params, "dc": self.datacenter} if self.datacenter else params

    def _read(self, path: str, what: str) -> httpx.Response:
        response = self._http.send("GET", self._url(path), params=self._with_dc({}))
        self._check(response, what)
        return response

    def _check(self, response: httpx.Response, what: str) -> None:
        if not response.is_success:
            raise self._fail(response, what)
        if response.headers.get(FILTERED_HEADER, "").lower() == "true":
            raise self._http.error(
                response,
                f"filtered what it answered to {what} by ACLs: the token may not read every "
                "service and node (it needs service:read and node:read)",
            )

    def _fail(self, response: httpx.Response, what: str) -> RegistryError:
        problem = f"failed to {what}"
        if response.status_code == 403:
            problem += " (ACL token refused: unknown token, or one without the rights)"
        return self._http.error(response, problem)

    def _local_node(self) -> str:
        """The node of the agent ``base_url`` names (``GET /v1/agent/self``), asked once."""
        if self._agent_node is None:
            response = self._http.send("GET", self._url("/v1/agent/self"))
            if not response.is_success:
                raise self._fail(response, "read the agent's node name")
            body = self._http.json(response)
            config = body.get("Config") if isinstance(body, dict) else None
            name = config.get("NodeName") if isinstance(config, dict) else None
            if not isinstance(name, str) or not name:
                raise self._http.error(response, "answered /v1/agent/self without a NodeName")
            self._agent_node = name
        return self._agent_node

    def _to_instance(self, entry: Any, service: str) -> RegistryInstance | SkippedInstance:
        raw = entry.get("Service") if isinstance(entry, dict) else None
        try:
            return self._read_entry(entry, service)
        except (validation.InvalidInstance, KeyError, TypeError, AttributeError) as exc:
            given_id = raw.get("ID") if isinstance(raw, dict) else None
            return validation.skipped(service, given_id, exc)

    def _read_entry(self, entry: Any, service: str) -> RegistryInstance:
        if not isinstance(entry, dict):
            raise TypeError(f"entry is {type(entry).__name__}, not an object")
        node, raw = entry["Node"], entry["Service"]
        node_name = validation.as_text("node", node["Node"])
        service_id = validation.as_text("instance_id", raw["ID"])
        # An empty Service.Address means the node's address (documented).
        host = validation.as_text("host", raw.get("Address") or node.get("Address"))
        metadata = validation.as_metadata(raw.get("Meta"))
        if self.version_key != DEFAULT_VERSION_KEY and self.version_key in metadata:
            metadata[DEFAULT_VERSION_KEY] = metadata[self.version_key]
        weights = raw.get("Weights")
        weight = validation.as_weight(weights.get("Passing") if isinstance(weights, dict) else None)
        in_maintenance, status = _health(entry.get("Checks"), service_id)
        return RegistryInstance(
            service=service,
            instance_id=f"{service_id}@{node_name}",
            host=host,
            port=validation.as_port(raw.get("Port")),
            weight=weight,
            healthy=status == STATUS_OF_CHECK[PASSING],
            enabled=not in_maintenance,
            metadata=metadata,
            cluster=DEFAULT_CLUSTER,
            status=status,
        )


def split_instance_id(instance_id: str) -> tuple[str, str]:
    """``<service ID>@<node>`` -> (service ID, node). A service ID may hold ``@`` itself; a
    node name may not, so the last one separates them."""
    service_id, sep, node = instance_id.rpartition("@")
    if not sep or not service_id or not node:
        raise RegistryError(f"{instance_id!r} is not a Consul instance id (<service ID>@<node>)")
    return service_id, node


def _health(checks: Any, service_id: str) -> tuple[bool, str]:
    """(in maintenance, status) from an entry's checks: the worst status of the checks other
    than the maintenance one."""
    if checks is None:
        checks = []
    if not isinstance(checks, list):
        raise TypeError(f"Checks is {type(checks).__name__}, not a list")
    in_maintenance, worst = False, PASSING
    for check in checks:
        state = str(check.get("Status", "")).lower()
        if check.get("CheckID") == MAINTENANCE_CHECK + service_id:
            in_maintenance = in_maintenance or state == CRITICAL
        elif state == CRITICAL or (state == WARNING and worst == PASSING):
            worst = state
        elif state not in STATUS_OF_CHECK:
            worst = CRITICAL  # an unknown status is not a passing one
    return in_maintenance, STATUS_OF_CHECK[worst]


def _index_of(response: httpx.Response) -> int:
    raw = response.headers.get(INDEX_HEADER, "")
    try:
        return int(raw)
    except ValueError:
        return 0
