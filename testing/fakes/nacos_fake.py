"""contract fake: not Nacos. It serves the documented Nacos naming Open API (v1, and the
v3 client/admin API of 3.x) and nothing more.

Test code only. ``FakeNacos`` is an in-memory naming registry behind a real HTTP server on
127.0.0.1 that answers the paths, parameters, response shapes and error codes of the Nacos
naming protocol as documented for Nacos 1.x, 2.x and 3.x (taken from the Nacos source and
Open API docs). It is what the adapter tests run against; it proves nothing about a real
Nacos beyond those documented protocol facts.

Per ``version``:

* "1.x": v1 naming API; the instance list has the 1.4 hand-built shape (``dom``, hosts with
  ``valid``/``marked``, no heartbeat fields).
* "2.x": v1 naming API; the instance list is the ServiceInfo shape with ``allIPs``.
* "3.x": v1 OPEN_API endpoints (instance list as ServiceInfo with ``allIps``), the v1 ADMIN_API
  endpoints (``PUT``/``PATCH``/``GET /v1/ns/instance``) answer 410 as with the default
  compatibility switches, plus the v3 admin API (service list/detail, instance list incl.
  disabled, instance detail, partial update), the v3 client instance API and v3 login.

The ``/v3`` paths answer 404 on "1.x" and "2.x". With ``username``/``password`` set, every request
except login needs a valid ``accessToken`` (parameter, ``accessToken`` header or
``Authorization: Bearer``) and otherwise gets a 403 text body, like the real auth filter.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
import re
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .http_fake import FakeHTTPServer, FakeRequest, FakeResponse, json_reply, text_reply

VERSIONS = ("1.x", "2.x", "3.x")
DEFAULT_NAMESPACE = "public"
DEFAULT_GROUP = "DEFAULT_GROUP"
DEFAULT_CLUSTER = "DEFAULT"
SEPARATOR = "@@"
LOGIN_PATHS = frozenset({"/v1/auth/login", "/v1/auth/users/login", "/v3/auth/user/login"})
LOGIN_FAILED = "User not found! Please check user exist or password is right!"
DEPRECATED_V1_ADMIN = (
    "Current API will be deprecated, please use API(s) `{alt}` instead, or set "
    "`nacos.core.api.compatibility.admin.enabled=true` in application.properties."
)


@dataclass
class FakeNacosInstance:
    ip: str
    port: int
    cluster: str = DEFAULT_CLUSTER
    weight: float = 1.0
    healthy: bool = True
    enabled: bool = True
    ephemeral: bool = True
    metadata: dict[str, str] = field(default_factory=dict)


ServiceKey = tuple[str, str, str]  # namespace, group, service
InstanceKey = tuple[str, int, str]  # ip, port, cluster


class _Abort(Exception):
    def __init__(self, response: FakeResponse):
        super().__init__(response.status)
        self.response = response


def _result(data: Any, code: int = 0, message: str = "success", status: int = 200):
    return json_reply({"code": code, "message": message, "data": data}, status)


def _parse_bool(value: str | None, default: bool | None) -> bool | None:
    if value is None or value == "":
        return default
    return value.strip().lower() == "true"


def _parse_metadata(raw: str | None) -> dict[str, str] | None:
    """JSON object string or ``k1=v1,k2=v2`` (UtilsAndCommons.parseMetadata)."""
    if raw is None or not raw.strip():
        return None
    try:
        parsed = json.loads(raw)
    except ValueError:
        parsed = None
        pairs = [part for part in raw.split(",") if part]
        if pairs and all("=" in part for part in pairs):
            parsed = dict(part.split("=", 1) for part in pairs)
    if not isinstance(parsed, dict):
        raise _Abort(text_reply(f"metadata format incorrect:{raw}", 400))
    return {str(k): str(v) for k, v in parsed.items()}


class FakeNacos(FakeHTTPServer):
    """In-memory Nacos naming server over real HTTP; see the module docstring."""

    context_path = "/nacos"

    def __init__(
        self,
        version: str = "2.x",
        username: str | None = None,
        password: str | None = None,
        page_limit: int | None = None,
        token_ttl: int = 18000,
    ):
        if version not in VERSIONS:
            raise ValueError(f"version must be one of {VERSIONS}")
        super().__init__()
        self.version = version
        self.username = username
        self.password = password
        self.page_limit = page_limit  # the server caps every pageSize to this
        self.token_ttl = token_ttl
        self.services: dict[ServiceKey, dict[InstanceKey, FakeNacosInstance]] = {}
        self._tokens: dict[str, float] = {}  # token -> expiry (time.monotonic)
        self._routes = self._build_routes()

    # -- test helpers -----------------------------------------------------------------------

    def add_service(
        self, service: str, *, group: str = DEFAULT_GROUP, namespace: str = DEFAULT_NAMESPACE
    ) -> None:
        with self.lock:
            self.services.setdefault((namespace, group, service), {})

    def add_instance(
        self,
        service: str,
        ip: str,
        port: int,
        metadata: dict[str, str] | None = None,
        healthy: bool = True,
        enabled: bool = True,
        weight: float = 1.0,
        group: str = DEFAULT_GROUP,
        namespace: str = DEFAULT_NAMESPACE,
        cluster: str = DEFAULT_CLUSTER,
        ephemeral: bool = True,
    ) -> FakeNacosInstance:
        record = FakeNacosInstance(
            ip, port, cluster, weight, healthy, enabled, ephemeral, dict(metadata or {})
        )
        with self.lock:
            self.services.setdefault((namespace, group, service), {})[(ip, port, cluster)] = record
        return copy.deepcopy(record)

    def remove_instance(
        self,
        service: str,
        ip: str,
        port: int,
        group: str = DEFAULT_GROUP,
        namespace: str = DEFAULT_NAMESPACE,
        cluster: str = DEFAULT_CLUSTER,
    ) -> bool:
        with self.lock:
            instances = self.services.get((namespace, group, service), {})
            return instances.pop((ip, port, cluster), None) is not None

    def instance(
        self,
        service: str,
        ip: str,
        port: int,
        group: str = DEFAULT_GROUP,
        namespace: str = DEFAULT_NAMESPACE,
        cluster: str = DEFAULT_CLUSTER,
    ) -> FakeNacosInstance | None:
        """A copy of the stored instance (None if absent), for assertions."""
        with self.lock:
            record = self.services.get((namespace, group, service), {}).get((ip, port, cluster))
            return copy.deepcopy(record)

    def expire_tokens(self) -> None:
        """Make every issued accessToken expired (the next use gets 403 "token expired!")."""
        with self.lock:
            for token in self._tokens:
                self._tokens[token] = 0.0

    # -- routing ----------------------------------------------------------------------------

    def _build_routes(self) -> dict[tuple[str, str], Callable[[FakeRequest], FakeResponse]]:
        routes: dict[tuple[str, str], Callable[[FakeRequest], FakeResponse]] = {
            ("POST", "/v1/auth/login"): self._login,
            ("POST", "/v1/auth/users/login"): self._login,
            ("GET", "/v1/ns/service/list"): self._v1_service_list,
            ("GET", "/v1/ns/instance/list"): self._v1_instance_list,
            ("POST", "/v1/ns/instance"): self._v1_register,
            ("DELETE", "/v1/ns/instance"): self._v1_deregister,
            ("PUT", "/v1/ns/instance/beat"): self._v1_beat,
            ("PUT", "/v1/ns/instance"): self._v1_update,
            ("PATCH", "/v1/ns/instance"): self._v1_patch,
            ("GET", "/v1/ns/instance"): self._v1_detail,
        }
        if self.version == "3.x":
            # ADMIN_API v1 endpoints: 410 with the default nacos.core.api.compatibility switches.
            for method, alt in (
                ("PUT", "PUT ${contextPath:nacos}/v3/admin/ns/instance"),
                ("PATCH", "PUT ${contextPath:nacos}/v3/admin/ns/instance/partial"),
                ("GET", "GET ${contextPath:nacos}/v3/admin/ns/instance"),
            ):
                routes[(method, "/v1/ns/instance")] = self._gone(alt)
            routes.update(
                {
                    ("POST", "/v3/auth/user/login"): self._login,
                    ("GET", "/v3/admin/ns/service/list"): self._v3_service_list,
                    ("GET", "/v3/admin/ns/service"): self._v3_service_detail,
                    ("GET", "/v3/admin/ns/instance/list"): self._v3_admin_instance_list,
                    ("GET", "/v3/admin/ns/instance"): self._v3_instance_detail,
                    ("PUT", "/v3/admin/ns/instance/partial"): self._v3_partial_update,
                    ("GET", "/v3/client/ns/instance/list"): self._v3_client_instance_list,
                    ("POST", "/v3/client/ns/instance"): self._v3_client_register,
                    ("DELETE", "/v3/client/ns/instance"): self._v3_client_deregister,
                }
            )
        return routes

    def handle(self, request: FakeRequest) -> FakeResponse:
        path = request.path
        if not path.startswith(self.context_path + "/"):
            return self._not_found(request)
        sub = path[len(self.context_path) :].rstrip("/")
        route = self._routes.get((request.method, sub))
        if route is None:
            if any(known == sub for _method, known in self._routes):
                return json_reply(
                    {"status": 405, "error": "Method Not Allowed", "path": path}, status=405
                )
            return self._not_found(request)
        try:
            if sub not in LOGIN_PATHS:
                self._check_auth(request)
            return route(request)
        except _Abort as abort:
            return abort.response

    @staticmethod
    def _not_found(request: FakeRequest) -> FakeResponse:
        # Spring Boot's default error body for an unmapped path.
        return json_reply(
            {
                "timestamp": "2025-01-01T00:00:00.000+00:00",
                "status": 404,
                "error": "Not Found",
                "path": request.path,
            },
            status=404,
        )

    @staticmethod
    def _gone(alternative: str) -> Callable[[FakeRequest], FakeResponse]:
        def gone(_request: FakeRequest) -> FakeResponse:
            message = DEPRECATED_V1_ADMIN.format(alt=alternative)
            return _result(None, code=40000, message=message, status=410)

        return gone

    # -- auth -------------------------------------------------------------------------------

    def _login(self, request: FakeRequest) -> FakeResponse:
        username = request.params.get("username", "")
        password = request.params.get("password", "")
        if self.username is not None and (username, password) != (self.username, self.password):
            return text_reply(LOGIN_FAILED, 403)
        token = secrets.token_urlsafe(24)
        self._tokens[token] = time.monotonic() + self.token_ttl
        body = {
            "accessToken": token,
            "tokenTtl": self.token_ttl,
            "globalAdmin": True,
            "username": username,
        }
        return json_reply(body, headers={"Authorization": f"Bearer {token}"})

    def _check_auth(self, request: FakeRequest) -> None:
        if self.username is None:
            return
        params = request.params
        if (params.get("username"), params.get("password")) == (self.username, self.password):
            return
        token = params.get("accessToken") or request.header("accessToken")
        bearer = request.header("authorization")
        if not token and bearer.lower().startswith("bearer "):
            token = bearer[7:].strip()
        if not token:
            raise _Abort(text_reply("user not found!", 403))
        expiry = self._tokens.get(token)
        if expiry is None:
            raise _Abort(text_reply("token invalid!", 403))
        if time.monotonic() >= expiry:
            raise _Abort(text_reply("token expired!", 403))

    # -- parameter helpers ------------------------------------------------------------------

    def _v3(self) -> bool:
        return self.version == "3.x"

    @staticmethod
    def _required(request: FakeRequest, name: str, *, v3: bool = False) -> str:
        value = request.params.get(name, "")
        if value.strip():
            return value
        if v3:
            data = f"Required parameter '{name}' type String is not present"
            raise _Abort(_result(data, code=10000, message="parameter missing", status=400))
        raise _Abort(text_reply(f"Param '{name}' is required.", 400))

    @staticmethod
    def _int(value: str, name: str, *, v3: bool = False) -> int:
        try:
            return int(value)
        except ValueError:
            if v3:
                raise _Abort(
                    _result(f"{name}: {value}", 20002, "parameter validate error", 400)
                ) from None
            raise _Abort(text_reply(f"Param '{name}' is illegal: {value}", 400)) from None

    def _v1_service(self, request: FakeRequest) -> ServiceKey:
        """ServiceNameFilter: ``svc`` + groupName -> ``group@@svc``; ``G@@svc`` kept."""
        name = self._required(request, "serviceName")
        namespace = request.params.get("namespaceId") or DEFAULT_NAMESPACE
        if SEPARATOR in name:
            group, _, name = name.partition(SEPARATOR)
        else:
            group = request.params.get("groupName") or DEFAULT_GROUP
        return namespace, group, name

    def _v3_service(self, request: FakeRequest) -> ServiceKey:
        name = self._required(request, "serviceName", v3=True)
        namespace = request.params.get("namespaceId") or DEFAULT_NAMESPACE
        group = request.params.get("groupName") or DEFAULT_GROUP
        return namespace, group, name

    def _instance_key(self, request: FakeRequest, *, v3: bool = False) -> InstanceKey:
        ip = self._required(request, "ip", v3=v3)
        port = self._int(self._required(request, "port", v3=v3), "port", v3=v3)
        cluster = (
            request.params.get("clusterName") or request.params.get("cluster") or DEFAULT_CLUSTER
        )
        return ip, port, cluster

    @staticmethod
    def _weight(raw: str | None, default: float | None, *, v3: bool = False) -> float | None:
        if raw is None or raw == "":
            return default
        weight = float(raw)
        if not 0.0 <= weight <= 10000.0:
            if v3:
                raise _Abort(
                    _result("The weights range from 0.0 to 10000.0", 21001, "weight error", 400)
                )
            raise _Abort(
                text_reply("instance format invalid: The weights range from 0.0 to 10000.0", 400)
            )
        return weight

    # -- shapes -----------------------------------------------------------------------------

    @staticmethod
    def _instance_json(record: FakeNacosInstance, key: ServiceKey) -> dict[str, Any]:
        """The 2.x/3.x ``Instance`` JSON (NON_NULL; computed heartbeat getters)."""
        _namespace, group, name = key
        grouped = f"{group}{SEPARATOR}{name}"
        meta = record.metadata
        body: dict[str, Any] = {
            "instanceId": f"{record.ip}#{record.port}#{record.cluster}#{grouped}",
            "ip": record.ip,
            "port": record.port,
            "weight": float(record.weight),
            "healthy": record.healthy,
            "enabled": record.enabled,
            "ephemeral": record.ephemeral,
            "clusterName": record.cluster,
            "serviceName": grouped,
            "metadata": dict(meta),
            "instanceHeartBeatInterval": int(meta.get("preserved.heart.beat.interval", 5000)),
            "instanceHeartBeatTimeOut": int(meta.get("preserved.heart.beat.timeout", 15000)),
            "ipDeleteTimeout": int(meta.get("preserved.ip.delete.timeout", 30000)),
        }
        if not meta:
            body["instanceIdGenerator"] = "simple"
        elif "preserved.instance.id.generator" in meta:
            body["instanceIdGenerator"] = meta["preserved.instance.id.generator"]
        return body

    @staticmethod
    def _host_1x(record: FakeNacosInstance, key: ServiceKey) -> dict[str, Any]:
        """A host of the Nacos 1.4 ``doSrvIpxt`` answer."""
        _namespace, group, name = key
        grouped = f"{group}{SEPARATOR}{name}"
        return {
            "ip": record.ip,
            "port": record.port,
            "valid": record.healthy,
            "healthy": record.healthy,
            "marked": not record.ephemeral,
            "instanceId": f"{record.ip}#{record.port}#{record.cluster}#{grouped}",
            "metadata": dict(record.metadata),
            "enabled": record.enabled,
            "weight": float(record.weight),
            "clusterName": record.cluster,
            "serviceName": grouped,
            "ephemeral": record.ephemeral,
        }

    # -- v1 endpoints -----------------------------------------------------------------------

    def _v1_service_list(self, request: FakeRequest) -> FakeResponse:
        page_no = self._int(self._required(request, "pageNo"), "pageNo")
        page_size = self._int(self._required(request, "pageSize"), "pageSize")
        if self.page_limit:
            page_size = min(page_size, self.page_limit)
        namespace = request.params.get("namespaceId") or DEFAULT_NAMESPACE
        group = request.params.get("groupName") or DEFAULT_GROUP
        names = sorted(s for (ns, g, s) in self.services if ns == namespace and g == group)
        start = max(page_no - 1, 0) * page_size
        return json_reply({"count": len(names), "doms": names[start : start + page_size]})

    def _v1_instance_list(self, request: FakeRequest) -> FakeResponse:
        key = self._v1_service(request)
        grouped = f"{key[1]}{SEPARATOR}{key[2]}"
        clusters_param = request.params.get("clusters", "")
        clusters = {c for c in clusters_param.split(",") if c}
        healthy_only = _parse_bool(request.params.get("healthyOnly"), False)
        now_ms = int(time.time() * 1000)
        if key not in self.services and self.version == "1.x":
            return json_reply(
                {"name": grouped, "clusters": clusters_param, "cacheMillis": 3000, "hosts": []}
            )
        records = [
            r
            for r in self.services.get(key, {}).values()
            if r.enabled  # disabled instances are filtered out of the client list
            and (not clusters or r.cluster in clusters)
            and (not healthy_only or r.healthy)
        ]
        checksum = hashlib.md5(repr(records).encode()).hexdigest()
        if self.version == "1.x":
            return json_reply(
                {
                    "dom": grouped,
                    "name": grouped,
                    "cacheMillis": 3000,
                    "lastRefTime": now_ms,
                    "checksum": checksum,
                    "useSpecifiedURL": False,
                    "clusters": clusters_param,
                    "env": "",
                    "metadata": {},
                    "hosts": [self._host_1x(r, key) for r in records],
                }
            )
        return json_reply(
            {
                "name": grouped,
                "groupName": key[1],
                "clusters": clusters_param,
                "cacheMillis": 10000,
                "hosts": [self._instance_json(r, key) for r in records],
                "lastRefTime": now_ms,
                "checksum": checksum if records else "",
                # isAllIPs() up to 2.5.x, isAllIps() from 3.0.0
                ("allIps" if self._v3() else "allIPs"): False,
                "reachProtectionThreshold": False,
                "valid": True,
            }
        )

    def _v1_register(self, request: FakeRequest) -> FakeResponse:
        key = self._v1_service(request)
        ip, port, cluster = self._instance_key(request)
        enabled = _parse_bool(request.params.get("enabled", request.params.get("enable")), True)
        record = FakeNacosInstance(
            ip=ip,
            port=port,
            cluster=cluster,
            weight=self._weight(request.params.get("weight"), 1.0) or 0.0,
            healthy=bool(_parse_bool(request.params.get("healthy"), True)),
            enabled=bool(enabled),
            ephemeral=bool(_parse_bool(request.params.get("ephemeral"), True)),
            metadata=_parse_metadata(request.params.get("metadata")) or {},
        )
        self.services.setdefault(key, {})[(ip, port, cluster)] = record
        return text_reply("ok")

    def _v1_deregister(self, request: FakeRequest) -> FakeResponse:
        key = self._v1_service(request)
        self.services.get(key, {}).pop(self._instance_key(request), None)
        return text_reply("ok")  # unknown instance: silent no-op

    def _v1_beat(self, request: FakeRequest) -> FakeResponse:
        key = self._v1_service(request)
        beat_raw = request.params.get("beat", "")
        beat = json.loads(beat_raw) if beat_raw else None
        params = request.params
        ip = (beat or {}).get("ip") or params.get("ip", "")
        port = int((beat or {}).get("port") or params.get("port") or 0)
        cluster = (beat or {}).get("cluster") or params.get("clusterName") or DEFAULT_CLUSTER
        known = (ip, port, cluster) in self.services.get(key, {})
        if not known:
            if beat is None:
                return json_reply(
                    {"clientBeatInterval": 5000, "code": 20404, "lightBeatEnabled": True}
                )
            self.services.setdefault(key, {})[(ip, port, cluster)] = FakeNacosInstance(
                ip=ip,
                port=port,
                cluster=cluster,
                weight=float(beat.get("weight", 1.0)),
                ephemeral=bool(beat.get("ephemeral", True)),
                metadata={str(k): str(v) for k, v in (beat.get("metadata") or {}).items()},
            )
        return json_reply({"clientBeatInterval": 5000, "code": 10200, "lightBeatEnabled": True})

    def _service_or_400(self, key: ServiceKey) -> dict[InstanceKey, FakeNacosInstance]:
        if key not in self.services:
            namespace, group, name = key
            raise _Abort(
                text_reply(
                    f"service not found, namespace: {namespace}, service: {group}{SEPARATOR}{name}",
                    400,
                )
            )
        return self.services[key]

    def _v1_update(self, request: FakeRequest) -> FakeResponse:
        """Full update: every omitted field is reset to its default (weight 1, enabled true,
        metadata {}), exactly the behaviour the adapter must never trigger."""
        key = self._v1_service(request)
        instances = self._service_or_400(key)
        instance_key = self._instance_key(request)
        record = instances.get(instance_key)
        if record is not None:
            record.weight = self._weight(request.params.get("weight"), 1.0) or 0.0
            record.enabled = bool(_parse_bool(request.params.get("enabled"), True))
            record.metadata = _parse_metadata(request.params.get("metadata")) or {}
        return text_reply("ok")

    def _v1_patch(self, request: FakeRequest) -> FakeResponse:
        """Partial update: only the given fields are merged (InstanceController.patch)."""
        key = self._v1_service(request)
        instances = self._service_or_400(key)
        record = instances.get(self._instance_key(request))
        if record is None:
            raise _Abort(text_reply("no matched ip found!", 404))
        metadata = _parse_metadata(request.params.get("metadata"))
        if metadata is not None:
            record.metadata = {**record.metadata, **metadata}
        weight = self._weight(request.params.get("weight"), None)
        if weight is not None:
            record.weight = weight
        healthy = _parse_bool(request.params.get("healthy"), None)
        if healthy is not None:
            record.healthy = healthy
        enabled = _parse_bool(request.params.get("enabled"), None)
        if enabled is not None:
            record.enabled = enabled
        return text_reply("ok")

    def _v1_detail(self, request: FakeRequest) -> FakeResponse:
        key = self._v1_service(request)
        ip, port, cluster = self._instance_key(request)
        record = self.services.get(key, {}).get((ip, port, cluster))
        if record is None:
            raise _Abort(text_reply("no matched ip found!", 404))
        grouped = f"{key[1]}{SEPARATOR}{key[2]}"
        return json_reply(
            {
                "service": grouped,
                "ip": ip,
                "port": port,
                "clusterName": cluster,
                "weight": record.weight,
                "healthy": record.healthy,
                "instanceId": f"{ip}#{port}#{cluster}#{grouped}",
                "metadata": dict(record.metadata),
            }
        )

    # -- v3 endpoints (3.x only) ------------------------------------------------------------

    def _v3_service_list(self, request: FakeRequest) -> FakeResponse:
        params = request.params
        namespace = params.get("namespaceId") or DEFAULT_NAMESPACE
        page_no = self._int(params.get("pageNo") or "1", "pageNo", v3=True)
        page_size = self._int(params.get("pageSize") or "100", "pageSize", v3=True)
        if page_no < 1 or page_size < 1:
            raise _Abort(
                _result("pageNo/pageSize must be positive", 20002, "parameter validate error", 400)
            )
        if self.page_limit:
            page_size = min(page_size, self.page_limit)

        # CatalogServiceV2Impl.patternServices: blank -> ".*", else ".*X.*" (a contains-match)
        def pattern(value: str) -> str:
            return ".*" if not value.strip() else f".*{value}.*"

        regex = re.compile(
            pattern(params.get("groupNameParam", ""))
            + SEPARATOR
            + pattern(params.get("serviceNameParam", ""))
        )
        ignore_empty = _parse_bool(params.get("ignoreEmptyService"), False)
        matched = sorted(
            (g, s)
            for (ns, g, s), instances in self.services.items()
            if ns == namespace
            and regex.fullmatch(f"{g}{SEPARATOR}{s}")
            and (instances or not ignore_empty)
        )
        start = (page_no - 1) * page_size
        items = []
        for group, name in matched[start : start + page_size]:
            records = list(self.services[(namespace, group, name)].values())
            items.append(
                {
                    "name": name,
                    "groupName": group,
                    "clusterCount": len({r.cluster for r in records}),
                    "ipCount": len(records),
                    "healthyInstanceCount": sum(r.healthy for r in records),
                    "triggerFlag": "false",
                }
            )
        return _result(
            {
                "totalCount": len(matched),
                "pageNumber": page_no,
                "pagesAvailable": math.ceil(len(matched) / page_size) if matched else 0,
                "pageItems": items,
            }
        )

    def _v3_service_detail(self, request: FakeRequest) -> FakeResponse:
        key = self._v3_service(request)
        namespace, group, name = key
        if key not in self.services:
            data = f"service not found, namespace: {namespace}, serviceName: {name}"
            raise _Abort(_result(data, 21008, "service not exist", 400))
        clusters = sorted({r.cluster for r in self.services[key].values()})
        return _result(
            {
                "namespaceId": namespace,
                "serviceName": name,
                "groupName": group,
                "clusterMap": {
                    c: {
                        "clusterName": c,
                        "healthChecker": {"type": "TCP"},
                        "healthyCheckPort": 80,
                        "useInstancePortForCheck": True,
                        "metadata": {},
                    }
                    for c in clusters
                },
                "metadata": {},
                "protectThreshold": 0.0,
                "selector": {"type": "none", "contextType": "NONE"},
                "ephemeral": True,
            }
        )

    def _v3_admin_instance_list(self, request: FakeRequest) -> FakeResponse:
        """Catalog listing: includes disabled instances; clusterName defaults to DEFAULT."""
        key = self._v3_service(request)
        cluster = request.params.get("clusterName") or DEFAULT_CLUSTER
        if key not in self.services:
            data = f"service {key[1]}{SEPARATOR}{key[2]} is not found!"
            raise _Abort(_result(data, 30000, "server error", 404))
        records = list(self.services[key].values())
        if cluster not in {r.cluster for r in records}:
            raise _Abort(_result(f"cluster {cluster} is not found!", 30000, "server error", 404))
        healthy_only = _parse_bool(request.params.get("healthyOnly"), False)
        return _result(
            [
                self._instance_json(r, key)
                for r in records
                if r.cluster == cluster and (not healthy_only or r.healthy)
            ]
        )

    def _v3_record(self, request: FakeRequest) -> tuple[ServiceKey, FakeNacosInstance]:
        key = self._v3_service(request)
        record = self.services.get(key, {}).get(self._instance_key(request, v3=True))
        if record is None:
            raise _Abort(_result("no matched ip found!", 20004, "resource not found", 404))
        return key, record

    def _v3_instance_detail(self, request: FakeRequest) -> FakeResponse:
        key, record = self._v3_record(request)
        return _result(self._instance_json(record, key))

    def _v3_partial_update(self, request: FakeRequest) -> FakeResponse:
        """``PUT /v3/admin/ns/instance/partial``: binds an InstanceForm whose
        fillDefaultValue() makes an omitted weight 1.0 and an omitted enabled true (SRC
        InstanceForm); metadata is merged only when given."""
        _key, record = self._v3_record(request)
        params = request.params
        metadata = _parse_metadata(params.get("metadata"))
        if metadata is not None:
            record.metadata = {**record.metadata, **metadata}
        record.weight = self._weight(params.get("weight"), 1.0, v3=True) or 0.0
        record.enabled = bool(_parse_bool(params.get("enabled"), True))
        return _result("ok")

    def _v3_client_instance_list(self, request: FakeRequest) -> FakeResponse:
        key = self._v3_service(request)
        cluster = request.params.get("clusterName") or DEFAULT_CLUSTER
        records = self.services.get(key, {}).values()
        return _result(
            [self._instance_json(r, key) for r in records if r.enabled and r.cluster == cluster]
        )

    def _v3_client_register(self, request: FakeRequest) -> FakeResponse:
        key = self._v3_service(request)
        ip, port, cluster = self._instance_key(request, v3=True)
        instances = self.services.setdefault(key, {})
        if _parse_bool(request.params.get("heartBeat"), False):
            if (ip, port, cluster) not in instances:
                return _result(None, 21003, "instance not found")
            return _result("ok")
        instances[(ip, port, cluster)] = FakeNacosInstance(
            ip=ip,
            port=port,
            cluster=cluster,
            weight=self._weight(request.params.get("weight"), 1.0, v3=True) or 0.0,
            healthy=bool(_parse_bool(request.params.get("healthy"), True)),
            enabled=bool(_parse_bool(request.params.get("enabled"), True)),
            ephemeral=bool(_parse_bool(request.params.get("ephemeral"), True)),
            metadata=_parse_metadata(request.params.get("metadata")) or {},
        )
        return _result("ok")

    def _v3_client_deregister(self, request: FakeRequest) -> FakeResponse:
        key = self._v3_service(request)
        self.services.get(key, {}).pop(self._instance_key(request, v3=True), None)
        return _result("ok")
