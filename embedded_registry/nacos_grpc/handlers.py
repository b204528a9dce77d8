"""The naming requests of Nacos 2.x's gRPC protocol, answered with the embedded registry's
naming semantics (naming.py, the same functions as the 1.x HTTP API) and credentials
(nacos_auth.py). Field names, request types and codes follow Nacos' api module
(com.alibaba.nacos.api.naming.remote.request/response, api.remote.response.ResponseCode,
api.exception.NacosException) and nacos-sdk-python 2.x (v2/nacos/naming/model): see
docs/gateway-protocol.md, "The embedded registry's Nacos contract"."""

import threading
import time
from dataclasses import dataclass
from typing import Any

from django.http import HttpRequest, QueryDict

from embedded_registry import clock, contract, nacos_auth, naming
from embedded_registry.changes import ServiceKey
from embedded_registry.nacos_grpc.connections import Connection, Connections
from embedded_registry.naming import InstanceKey, NamingError
from registry_sync.adapters import validation
from routing_engine.records import MAX_WEIGHT

# NacosException's codes (errorCode); resultCode is ResponseCode SUCCESS 200 / FAIL 500.
INVALID_PARAM, NO_RIGHT, SERVER_ERROR, BAD_GATEWAY = 400, 403, 500, 502
UN_REGISTER, NO_HANDLER = 301, 302
REGISTER, DEREGISTER = "registerInstance", "deregisterInstance"
BATCH_REGISTER = "batchRegisterInstance"
CACHE_MILLIS = 10000


class NacosError(Exception):
    """Answered as `response_type` (an ErrorResponse when None) with resultCode 500."""

    def __init__(self, code: int, message: str, response_type: str | None = None):
        super().__init__(message)
        self.code, self.message, self.response_type = code, message, response_type


@dataclass
class Call:
    kind: str
    body: dict[str, Any]
    headers: dict[str, str]
    peer_ip: str
    connection: Connection


def ok(request_id: str, **fields: Any) -> dict[str, Any]:
    return {"resultCode": 200, "errorCode": 0, "message": "", "requestId": request_id,
            "success": True, **fields}  # fmt: skip


def failed(code: int, message: str, request_id: str = "") -> dict[str, Any]:
    return {"resultCode": 500, "errorCode": code, "message": message, "requestId": request_id,
            "success": False}  # fmt: skip


def _actor(call: Call, response_type: str) -> str:
    """As Nacos' RemoteRequestAuthFilter: the `accessToken` header (or `username` and
    `password` headers), refused as the handler's own response with NO_RIGHT."""
    request = HttpRequest()
    request.method = "POST"
    request.META = {"REMOTE_ADDR": call.peer_ip}
    params = QueryDict(mutable=True)
    for name in ("accessToken", "username", "password"):
        if call.headers.get(name):
            params[name] = call.headers[name]
    try:
        return nacos_auth.actor_of(request, params)
    except nacos_auth.AccessDenied as exc:
        raise NacosError(NO_RIGHT, str(exc), response_type) from None


def _text(body: dict[str, Any], name: str, default: str = "") -> str:
    value = body.get(name)
    if value is None or value == "":
        return default
    if not isinstance(value, str):
        raise NamingError(f"Param '{name}' is illegal: {validation.show(value)}")
    return value.strip()


def _service(body: dict[str, Any]) -> ServiceKey:
    name = _text(body, "serviceName")
    if not name:
        raise NamingError("Param 'serviceName' is required.")
    group, service = naming.split_service_name(name, _text(body, "groupName", "DEFAULT_GROUP"))
    return ServiceKey(_text(body, "namespace", "public"), group, service)


def _instance(service: ServiceKey, raw: Any) -> tuple[InstanceKey, dict[str, Any]]:
    """The key and the stored fields of an Instance JSON, checked as over HTTP."""
    if not isinstance(raw, dict):
        raise NamingError("Param 'instance' is required.")
    ip = raw.get("ip")
    if not isinstance(ip, str) or not ip.strip():
        raise NamingError("Param 'ip' is required.")
    try:
        port = validation.as_port(raw.get("port"))
        weight = validation.as_weight(raw.get("weight"))
        metadata = validation.as_metadata(raw.get("metadata"))
    except validation.InvalidInstance as exc:
        raise NamingError(f"Param '{exc.field}' is illegal: {exc.reason}") from None
    if not 0.0 <= weight <= MAX_WEIGHT:
        raise NamingError("instance format invalid: The weights range from 0.0 to 10000.0")
    cluster = raw.get("clusterName") or "DEFAULT"
    key = InstanceKey(
        service.namespace, service.group, service.service, str(cluster), ip.strip(), port
    )
    contract.check_instance(key, weight=weight, metadata=metadata)
    fields = {"weight": weight, "healthy": raw.get("healthy") is not False,
              "enabled": raw.get("enabled") is not False, "metadata": metadata}  # fmt: skip
    return key, fields


_ref_lock = threading.Lock()
_last_ref_time = 0


def _ref_time() -> int:
    """Milliseconds, increasing strictly: clients drop a ServiceInfo whose lastRefTime is not
    newer than the one they hold, and two changes may come within a millisecond."""
    global _last_ref_time
    with _ref_lock:
        _last_ref_time = max(int(time.time() * 1000), _last_ref_time + 1)
        return _last_ref_time


def service_info(service: ServiceKey, clusters: str, healthy_only: bool = False) -> dict:
    """Nacos' ServiceInfo JSON (as QueryServiceResponse and NotifySubscriberRequest carry
    it): `name` without the group, `groupName` beside it."""
    now = clock.now()
    selected = [c for c in clusters.split(",") if c]
    rows = naming.list_instances(
        service.namespace, service.group, service.service, clusters=selected
    )
    hosts = [contract.host_json(row, now) for row in rows]
    if healthy_only:
        hosts = [h for h in hosts if h["healthy"]]
    return {
        "name": service.service,
        "groupName": service.group,
        "clusters": clusters,
        "cacheMillis": CACHE_MILLIS,
        "hosts": hosts,
        "lastRefTime": _ref_time(),
        "checksum": "",
        "allIPs": False,
        "reachProtectionThreshold": False,
        "valid": True,
    }


def _register(
    connections: Connections, call: Call, key: InstanceKey, fields: dict, actor: str
) -> None:
    # Ephemeral: its life is the connection's (PersistentInstanceRequest is for the others).
    naming.register(key, actor=actor, ephemeral=True, **fields)
    connections.owns(call.connection, key, actor)


def _deregister(connections: Connections, call: Call, key: InstanceKey, actor: str) -> None:
    naming.deregister(key, actor=actor)
    connections.disowns(call.connection, key)


def instance(connections: Connections, call: Call) -> dict[str, Any]:
    actor = _actor(call, "InstanceResponse")
    service = _service(call.body)
    kind = call.body.get("type")
    key, fields = _instance(service, call.body.get("instance"))
    if kind == REGISTER:
        _register(connections, call, key, fields, actor)
    elif kind == DEREGISTER:
        _deregister(connections, call, key, actor)
    else:
        raise NacosError(INVALID_PARAM, f"Unsupported request type {kind}")
    return ok(call.body.get("requestId", ""), type=kind)


def batch_instance(connections: Connections, call: Call) -> dict[str, Any]:
    """Nacos' batch register: the connection's instances of the service become these (a
    client's batch deregister sends the ones it keeps)."""
    actor = _actor(call, "BatchInstanceResponse")
    service = _service(call.body)
    kind = call.body.get("type")
    if kind != BATCH_REGISTER:
        raise NacosError(INVALID_PARAM, f"Unsupported request type {kind}")
    raw = call.body.get("instances")
    if not isinstance(raw, list):
        raise NamingError("Param 'instances' is required.")
    wanted = [_instance(service, item) for item in raw]
    keep = {key for key, _ in wanted}
    for key in connections.owned(call.connection, service):
        if key not in keep:
            _deregister(connections, call, key, actor)
    for key, fields in wanted:
        _register(connections, call, key, fields, actor)
    return ok(call.body.get("requestId", ""), type=kind)


def persistent_instance(connections: Connections, call: Call) -> dict[str, Any]:
    actor = _actor(call, "InstanceResponse")
    service = _service(call.body)
    kind = call.body.get("type")
    key, fields = _instance(service, call.body.get("instance"))
    if kind == REGISTER:
        naming.register(key, actor=actor, ephemeral=False, **fields)
    elif kind == DEREGISTER:
        naming.deregister(key, actor=actor)
    else:
        raise NacosError(INVALID_PARAM, f"Unsupported request type {kind}")
    return ok(call.body.get("requestId", ""), type=kind)


def query(connections: Connections, call: Call) -> dict[str, Any]:
    _actor(call, "QueryServiceResponse")
    service = _service(call.body)
    # Java's field is healthyOnly; nacos-sdk-python 2.x sends healthOnly.
    healthy_only = bool(call.body.get("healthyOnly") or call.body.get("healthOnly"))
    info = service_info(service, _text(call.body, "cluster"), healthy_only)
    return ok(call.body.get("requestId", ""), serviceInfo=info)


def subscribe(connections: Connections, call: Call) -> dict[str, Any]:
    _actor(call, "SubscribeServiceResponse")
    service = _service(call.body)
    clusters = _text(call.body, "clusters")
    if call.body.get("subscribe") is False:
        connections.unsubscribe(call.connection, service, clusters)
    else:
        connections.subscribe(call.connection, service, clusters)
    return ok(call.body.get("requestId", ""), serviceInfo=service_info(service, clusters))


def service_list(connections: Connections, call: Call) -> dict[str, Any]:
    _actor(call, "ServiceListResponse")
    namespace = _text(call.body, "namespace", "public")
    group = _text(call.body, "groupName", "DEFAULT_GROUP")
    names = sorted(naming.service_names(namespace, group))
    try:
        page, size = int(call.body.get("pageNo") or 1), int(call.body.get("pageSize") or 10)
    except (TypeError, ValueError):
        raise NamingError("Param 'pageNo' or 'pageSize' is illegal.") from None
    start = max(page - 1, 0) * max(size, 0)
    return ok(
        call.body.get("requestId", ""),
        count=len(names),
        serviceNames=names[start : start + max(size, 0)],
    )


# request type -> (its handler, its response type)
HANDLERS = {
    "InstanceRequest": (instance, "InstanceResponse"),
    "BatchInstanceRequest": (batch_instance, "BatchInstanceResponse"),
    "PersistentInstanceRequest": (persistent_instance, "InstanceResponse"),
    "ServiceQueryRequest": (query, "QueryServiceResponse"),
    "SubscribeServiceRequest": (subscribe, "SubscribeServiceResponse"),
    "ServiceListRequest": (service_list, "ServiceListResponse"),
}
