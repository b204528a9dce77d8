"""The embedded registry's wire protocol: the Nacos 1.x naming Open API subset that
clients use (register, deregister, update, heartbeat, list), with Nacos' parameter names,
defaults, response bodies and error texts (the documented Nacos v1 naming Open API), and
Nacos' login (`/nacos/v1/auth/login`): every naming call needs credentials, as in a Nacos
with auth enabled (embedded_registry/nacos_auth.py), so existing clients work unchanged."""

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse, QueryDict
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_http_methods

from embedded_registry import clock, contract, nacos_auth, naming
from embedded_registry.naming import InstanceKey, NamingError
from registry_sync.adapters import validation
from routing_engine import bounded_json
from routing_engine.records import MAX_WEIGHT

View = Callable[..., HttpResponse]

CACHE_MILLIS = 10000
BEAT_OK, BEAT_NOT_FOUND = 10200, 20404


def _params(request: HttpRequest) -> QueryDict:
    """Servlet-style parameters: the query string merged with a form body, whatever the
    method (Django parses the body for POST only)."""
    params = request.GET.copy()
    if request.method != "GET" and request.body:
        content_type = request.content_type or ""
        if content_type in ("", "application/x-www-form-urlencoded"):
            for key, values in QueryDict(request.body).lists():
                params.setlistdefault(key, []).extend(values)
    return params


def _required(params: QueryDict, name: str) -> str:
    value = params.get(name)
    if value is None or not value.strip():
        raise NamingError(f"Param '{name}' is required.")
    return value.strip()


def _bool(params: QueryDict, *names: str, default: bool) -> bool:
    for name in names:
        value = params.get(name)
        if value is not None:
            return value.strip().lower() == "true"
    return default


def _key(
    params: QueryDict,
    *,
    ip: str | None = None,
    port: int | str | None = None,
    cluster: str | None = None,
) -> InstanceKey:
    service_name = _required(params, "serviceName")
    group, service = naming.split_service_name(
        service_name, params.get("groupName") or "DEFAULT_GROUP"
    )
    raw_port = port if port is not None else _required(params, "port")
    try:
        port_number = int(raw_port)
    except (TypeError, ValueError):
        raise NamingError(f"Param 'port' is illegal: {raw_port}") from None
    return InstanceKey(
        namespace=params.get("namespaceId") or "public",
        group=group,
        service=service,
        cluster=cluster or params.get("clusterName") or params.get("cluster") or "DEFAULT",
        ip=ip or _required(params, "ip"),
        port=port_number,
    )


def _weight(params: QueryDict) -> float:
    raw = params.get("weight") or "1"
    try:
        weight = float(raw)
    except ValueError:
        raise NamingError(f"Param 'weight' is illegal: {raw}") from None
    if not 0.0 <= weight <= 10000.0:
        raise NamingError("instance format invalid: The weights range from 0.0 to 10000.0")
    return weight


def _text(body: str, status: int = 200) -> HttpResponse:
    return HttpResponse(body, status=status, content_type="text/plain;charset=UTF-8")


def naming_errors(view: View) -> View:
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        try:
            return view(request, *args, **kwargs)
        except NamingError as exc:
            return _text(str(exc), status=400)

    wrapper.__name__ = view.__name__
    return wrapper


def registry_auth(view: View) -> View:
    """Credentials first, as Nacos' auth filter comes before its controllers: the view gets
    `actor`, the username the call comes from."""

    @wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        try:
            actor = nacos_auth.actor_of(request, _params(request))
        except nacos_auth.AccessDenied as exc:
            return _text(str(exc), status=403)
        return view(request, *args, actor=actor, **kwargs)

    return wrapper


@csrf_exempt
@require_http_methods(["POST"])
def login(request: HttpRequest) -> HttpResponse:
    """Nacos' login: `username` and `password` (query or form) for an accessToken."""
    params = _params(request)
    try:
        grant = nacos_auth.login(request, params.get("username"), params.get("password"))
    except nacos_auth.AccessDenied as exc:
        return _text(str(exc), status=403)
    response = JsonResponse(
        {
            "accessToken": grant.access_token,
            "tokenTtl": grant.ttl,
            "globalAdmin": grant.global_admin,
            "username": grant.username,
        }
    )
    response["Authorization"] = f"Bearer {grant.access_token}"
    return response


@csrf_exempt
@require_http_methods(["POST", "PUT", "DELETE"])
@registry_auth
@naming_errors
def instance(request: HttpRequest, actor: str) -> HttpResponse:
    params = _params(request)
    key = _key(params)
    if request.method == "DELETE":
        naming.deregister(key, actor=actor)
        return _text("ok")
    weight, metadata = _weight(params), naming.parse_metadata(params.get("metadata"))
    contract.check_instance(key, weight=weight, metadata=metadata)
    if request.method == "POST":
        naming.register(
            key,
            actor=actor,
            weight=weight,
            healthy=_bool(params, "healthy", default=True),
            enabled=_bool(params, "enabled", "enable", default=True),
            ephemeral=_bool(params, "ephemeral", default=True),
            metadata=metadata,
        )
    else:
        naming.update(
            key,
            actor=actor,
            weight=weight,
            enabled=_bool(params, "enabled", "enable", default=True),
            metadata=metadata,
        )
    return _text("ok")


@csrf_exempt
@require_http_methods(["PUT"])
@registry_auth
@naming_errors
def beat(request: HttpRequest, actor: str) -> HttpResponse:
    params = _params(request)
    beat_info = None
    raw_beat = params.get("beat")
    if raw_beat:
        try:
            beat_info = bounded_json.loads(raw_beat)
        except ValueError:
            beat_info = None
        if not isinstance(beat_info, dict):
            raise NamingError(f"Param 'beat' is illegal: {naming.echo(raw_beat)}")
    if beat_info:
        key = _key(
            params,
            ip=beat_info.get("ip"),
            port=beat_info.get("port"),
            cluster=beat_info.get("cluster"),
        )
        # An unknown instance is registered from the beat info: the same check as above.
        try:
            weight = validation.as_weight(beat_info.get("weight") or 1.0)
            metadata = validation.as_metadata(beat_info.get("metadata"))
        except validation.InvalidInstance as exc:
            raise NamingError(f"Param 'beat' is illegal: {exc.reason}") from None
        if not 0.0 <= weight <= MAX_WEIGHT:
            raise NamingError("instance format invalid: The weights range from 0.0 to 10000.0")
        contract.check_instance(key, weight=weight, metadata=metadata)
    else:
        key = _key(params)
    found = naming.beat(key, beat_info)
    return JsonResponse(
        {
            "clientBeatInterval": naming.BEAT_INTERVAL_MS,
            "code": BEAT_OK if found else BEAT_NOT_FOUND,
            "lightBeatEnabled": True,
        }
    )


@require_GET
@registry_auth
@naming_errors
def instance_list(request: HttpRequest, actor: str) -> HttpResponse:
    params = request.GET
    service_name = _required(params, "serviceName")
    group, service = naming.split_service_name(
        service_name, params.get("groupName") or "DEFAULT_GROUP"
    )
    clusters = [c for c in (params.get("clusters") or "").split(",") if c]
    now = clock.now()
    rows = naming.list_instances(
        params.get("namespaceId") or "public", group, service, clusters=clusters
    )
    hosts = [contract.host_json(row, now) for row in rows]
    if _bool(params, "healthyOnly", default=False):
        hosts = [h for h in hosts if h["healthy"]]
    return JsonResponse(
        {
            "name": f"{group}@@{service}",
            "groupName": group,
            "clusters": ",".join(clusters),
            "cacheMillis": CACHE_MILLIS,
            "hosts": hosts,
            "lastRefTime": int(now.timestamp() * 1000),
            "checksum": "",
            "allIPs": False,
            "reachProtectionThreshold": False,
            "valid": True,
        }
    )


@require_GET
@registry_auth
@naming_errors
def operator_metrics(request: HttpRequest, actor: str) -> HttpResponse:
    """Nacos' server status, which clients ask to tell whether the registry is up (the
    Node.js SDK's getServerStatus()); the counts that apply to one embedded registry."""
    services, instances = naming.counts()
    return JsonResponse({"status": "UP", "serviceCount": services, "instanceCount": instances})
