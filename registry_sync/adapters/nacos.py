"""Nacos naming adapter over the HTTP open/admin APIs (Nacos 1.x, 2.x and 3.x).

Paths, parameters and shapes follow the documented Nacos naming Open API (v1, and v3 on 3.x).

* ``api_version="v1"``: the v1 open API (``/nacos/v1/ns/...``), served by 1.x, 2.x and, for the
  OPEN_API part, 3.x. Its instance list is the *client* list: the server drops ``enabled=false``
  instances from it, so ``lists_disabled`` is False and a missing instance may just be disabled.
  Taking an instance offline uses ``PATCH /v1/ns/instance`` (ADMIN_API: 410 on a default 3.x).
* ``api_version="v3"``: the 3.x admin API (``/nacos/v3/admin/ns/...``). Its instance list includes
  disabled instances, so ``lists_disabled`` is True.
* ``api_version="auto"``: probe once (see :meth:`NacosAdapter._probe_version`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from typing import Any, Self
from urllib.parse import urlsplit, urlunsplit

import httpx

import outbound
from outbound.answers import excerpt

from . import validation
from .base import (
    DEFAULT_CLUSTER,
    DEFAULT_GROUP,
    DEFAULT_NAMESPACE,
    RegistryError,
    RegistryInstance,
    SkippedInstance,
)
from .http_transport import HttpTransport

API_VERSIONS = ("auto", "v1", "v3")
GROUP_SEPARATOR = "@@"
DEFAULT_TOKEN_TTL = 18000.0  # seconds; nacos.core.auth.plugin.nacos.token.expire.seconds
V1_SERVICE_PAGE_SIZE = 1000  # v1 service/list has no upper bound on pageSize
V3_SERVICE_PAGE_SIZE = 500  # v3 PageForm has no upper bound either; 500 was the v2 maximum
MAX_PAGES = 10_000  # guard against a server whose paging never ends
# v2/v3 Result codes that mean "no such service/instance" rather than a failure.
NOT_FOUND_CODES = frozenset({20004, 21003, 21008})


def _normalize_base_url(base_url: str) -> str:
    """``http://host:8848`` -> ``http://host:8848/nacos`` (the default context path)."""
    url = (base_url or "").strip().rstrip("/")
    parts = urlsplit(url)
    if not parts.scheme or not parts.netloc:
        raise ValueError(f"Nacos base_url must look like http://host:8848/nacos, got {base_url!r}")
    if not parts.path:
        url = urlunsplit(parts._replace(path="/nacos"))
    return url


def _as_bool(value: Any, default: bool) -> bool:
    if value is None:
        return default
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() == "true"


class NacosAdapter:
    """Registry adapter for Nacos. See the module docstring for the API versions."""

    kind = "nacos"

    def __init__(
        self,
        base_url: str,
        *,
        namespace: str = DEFAULT_NAMESPACE,
        group: str = DEFAULT_GROUP,
        username: str = "",
        password: str = "",
        api_version: str = "auto",
        timeout: float = 3.0,
        page_size: int | None = None,
        clock: Callable[[], float] = time.monotonic,
        policy: outbound.Policy = outbound.DEFAULT_POLICY,
    ):
        if api_version not in API_VERSIONS:
            raise ValueError(f"unknown Nacos api_version {api_version!r}; expected {API_VERSIONS}")
        self.base_url = _normalize_base_url(base_url)
        self.namespace = namespace or DEFAULT_NAMESPACE
        self.group = group or DEFAULT_GROUP
        self.username = username or ""
        self._password = password or ""
        self.requested_api_version = api_version
        self.page_size = page_size
        self._clock = clock
        self._version: str | None = None if api_version == "auto" else api_version
        self._token: str | None = None
        self._token_refresh_at = 0.0
        self._http = HttpTransport("Nacos", timeout=timeout, policy=policy)

    # -- public API -------------------------------------------------------------------------

    @property
    def api_version(self) -> str:
        """The API in use, "v1" or "v3" (resolving "auto" probes the server once)."""
        return self._resolve_version()

    @property
    def lists_disabled(self) -> bool:
        """True when ``list_instances`` includes disabled instances (v3 admin listing).

        False for the v1 client listing: there, an instance missing from the list may be
        gone *or* merely disabled (``enabled=false``), so absence must not be read as "gone".
        With "auto" it is also False (the safe answer) until the first call has probed the
        version; it never does network I/O itself. Read it after ``list_instances``.
        """
        return self._version == "v3"

    def list_services(self) -> list[str]:
        if self._resolve_version() == "v3":
            return self._list_services_v3()
        return self._list_services_v1()

    def list_instances(self, service: str) -> list[RegistryInstance | SkippedInstance]:
        name = self._plain_service(service)
        if self._resolve_version() == "v3":
            return self._list_instances_v3(name)
        return self._list_instances_v1(name)

    def set_enabled(self, instance: RegistryInstance, enabled: bool) -> None:
        if self._resolve_version() == "v3":
            self._set_enabled_v3(instance, enabled)
        else:
            self._set_enabled_v1(instance, enabled)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- version probe ----------------------------------------------------------------------

    def _resolve_version(self) -> str:
        if self._version is None:
            self._version = self._probe_version()
        return self._version

    def _probe_version(self) -> str:
        """Decide between the v3 admin API and the v1 open API, once per adapter.

        Probe: ``GET /v3/admin/ns/service/list?pageNo=1&pageSize=1`` without a token.
        * 404 (no such path: Nacos 1.x/2.x) or 410 (disabled) -> "v1".
        * 2xx -> "v3"; 401/403 also -> "v3": the path exists and wants a token (a default 3.x
          has admin auth on). Nacos 2.x lets unknown paths through its auth filter, so they 404.
        * anything else (5xx, timeout, refused) -> RegistryError; the next call probes again.
        """
        response = self._http.send(
            "GET",
            self._url("/v3/admin/ns/service/list"),
            params={"namespaceId": self.namespace, "pageNo": 1, "pageSize": 1},
        )
        if response.status_code in (404, 410):
            return "v1"
        if response.is_success or response.status_code in (401, 403):
            return "v3"
        raise self._http.error(response, "could not be probed for its API version")

    # -- auth -------------------------------------------------------------------------------

    def _login(self) -> None:
        """Log in and keep ``accessToken``; refresh it a tenth of ``tokenTtl`` before expiry
        (the window the reference Python client uses)."""
        path = "/v3/auth/user/login" if self._resolve_version() == "v3" else "/v1/auth/login"
        url = self._url(path)
        started = self._clock()
        response = self._http.send(
            "POST", url, data={"username": self.username, "password": self._password}
        )
        if response.status_code in (401, 403):
            raise RegistryError(
                f"Nacos login failed for user {self.username!r} at {url}: wrong username or "
                f"password (HTTP {response.status_code}: {excerpt(response.text)})",
                url=url,
                status=response.status_code,
            )
        body = self._http.json(response)
        if (
            isinstance(body, dict)
            and "accessToken" not in body
            and isinstance(body.get("data"), dict)
        ):
            body = body["data"]  # tolerate a Result-wrapped login answer
        token = body.get("accessToken") if isinstance(body, dict) else None
        if not token:
            raise self._http.error(response, "login answered without an accessToken")
        try:
            ttl = float(body.get("tokenTtl", DEFAULT_TOKEN_TTL))
        except (TypeError, ValueError):
            ttl = DEFAULT_TOKEN_TTL
        self._token = str(token)
        self._token_refresh_at = started + ttl - ttl / 10

    def _auth_params(self) -> dict[str, str]:
        if not self.username:
            return {}
        if self._token is None or self._clock() >= self._token_refresh_at:
            self._login()
        assert self._token is not None
        return {"accessToken": self._token}

    # -- HTTP helpers -----------------------------------------------------------------------

    def _url(self, path: str) -> str:
        return self.base_url + path

    def _call(self, method: str, path: str, params: Mapping[str, Any]) -> httpx.Response:
        """One API call with the token added; on a 403 log in again once and retry (the token
        may have expired or been revoked server-side before our refresh time)."""
        for attempt in (1, 2):
            query = {**params, **self._auth_params()}
            response = self._http.send(method, self._url(path), params=query)
            if response.status_code == 403 and self.username and attempt == 1:
                self._token = None
                continue
            return response
        raise AssertionError("unreachable")  # pragma: no cover

    def _fail(self, response: httpx.Response, what: str) -> RegistryError:
        problem = f"failed to {what}"
        status = response.status_code
        if status == 403:
            problem += " (access denied: check username/password and the user's permissions)"
        elif status == 410:
            problem += " (API disabled on this Nacos 3.x server; use api_version 'v3' or 'auto')"
        elif status == 404 and self._envelope(response) is None:
            problem += " (no such API on this server; check base_url and api_version)"
        return self._http.error(response, problem)

    def _json(self, response: httpx.Response, what: str) -> Any:
        if not response.is_success:
            raise self._fail(response, what)
        return self._http.json(response)

    @staticmethod
    def _envelope(response: httpx.Response) -> dict[str, Any] | None:
        """The v2/v3 ``{"code","message","data"}`` Result, or None if the body is not one."""
        try:
            body = json.loads(response.content)
        except ValueError:
            return None
        if isinstance(body, dict) and "code" in body and "data" in body:
            return body
        return None

    def _is_not_found(self, response: httpx.Response) -> bool:
        """A v3 answer saying the service/cluster/instance does not exist (not a failure)."""
        if response.status_code not in (400, 404):
            return False
        envelope = self._envelope(response)
        if envelope is None:
            return False
        text = f"{envelope.get('message')} {envelope.get('data')}".lower()
        return envelope.get("code") in NOT_FOUND_CODES or "not found" in text or "not exist" in text

    def _v3_data(self, response: httpx.Response, what: str) -> Any:
        if not response.is_success:
            raise self._fail(response, what)
        envelope = self._envelope(response)
        if envelope is None:
            raise self._http.error(response, f"did not answer a Result envelope to {what}")
        if envelope.get("code") != 0:
            raise self._http.error(
                response,
                f"refused to {what} (code {envelope.get('code')}: {envelope.get('message')})",
            )
        return envelope.get("data")

    def _plain_service(self, service: str) -> str:
        group, sep, name = service.rpartition(GROUP_SEPARATOR)
        if sep and group != self.group:
            raise ValueError(
                f"service {service!r} is in group {group!r}; "
                f"this adapter is bound to group {self.group!r}"
            )
        return name if sep else service

    def _unexpected(self, response: httpx.Response, what: str) -> RegistryError:
        return self._http.error(response, f"answered an unexpected shape to {what}")

    # -- services ---------------------------------------------------------------------------

    def _list_services_v1(self) -> list[str]:
        what = "list services"
        size = self.page_size or V1_SERVICE_PAGE_SIZE
        names: dict[str, None] = {}
        for page_no in range(1, MAX_PAGES + 1):
            response = self._call(
                "GET",
                "/v1/ns/service/list",
                {
                    "pageNo": page_no,
                    "pageSize": size,
                    "namespaceId": self.namespace,
                    "groupName": self.group,
                },
            )
            body = self._json(response, what)
            doms = body.get("doms") if isinstance(body, dict) else None
            if not isinstance(doms, list):
                raise self._unexpected(response, what)
            for dom in doms:
                names[str(dom).rpartition(GROUP_SEPARATOR)[2]] = None
            try:
                count = int(body.get("count", 0))
            except (TypeError, ValueError):
                raise self._unexpected(response, what) from None
            if not doms or len(names) >= count:
                break
        return sorted(names)

    def _list_services_v3(self) -> list[str]:
        what = "list services"
        size = self.page_size or V3_SERVICE_PAGE_SIZE
        names: dict[str, None] = {}
        seen = 0
        for page_no in range(1, MAX_PAGES + 1):
            response = self._call(
                "GET",
                "/v3/admin/ns/service/list",
                {
                    "namespaceId": self.namespace,
                    # groupNameParam is a *contains* pattern server-side (".*G.*@@.*"), so items
                    # of other groups whose name contains ours are filtered out below.
                    "groupNameParam": self.group,
                    "pageNo": page_no,
                    "pageSize": size,
                },
            )
            page = self._v3_data(response, what)
            items = page.get("pageItems") if isinstance(page, dict) else None
            if not isinstance(items, list):
                raise self._unexpected(response, what)
            for item in items:
                if not isinstance(item, dict) or "name" not in item:
                    raise self._unexpected(response, what)
                if item.get("groupName", self.group) == self.group:
                    names[str(item["name"]).rpartition(GROUP_SEPARATOR)[2]] = None
            seen += len(items)
            pages = page.get("pagesAvailable")
            total = page.get("totalCount")
            if not items:
                break
            if isinstance(pages, int) and page_no >= pages:
                break
            if isinstance(total, int) and seen >= total:
                break
        return sorted(names)

    # -- instances --------------------------------------------------------------------------

    def _to_instance(self, host: Any, service: str) -> RegistryInstance | SkippedInstance:
        """Map a host of the 1.4 shape (valid/marked) or the 2.x/3.x Instance shape; one that
        cannot be read (no ip, a port "abc", metadata not an object, ...) is skipped."""
        try:
            ip = validation.as_text("ip", host["ip"])
            port = validation.as_port(host.get("port"))
            weight = validation.as_weight(host.get("weight"))
            cluster = validation.as_text("clusterName", host.get("clusterName") or DEFAULT_CLUSTER)
            instance_id = host.get("instanceId") or (
                f"{ip}#{port}#{cluster}#{self.group}{GROUP_SEPARATOR}{service}"
            )
            healthy = _as_bool(host.get("healthy", host.get("valid")), True)
            return RegistryInstance(
                service=service,
                instance_id=validation.as_text("instanceId", instance_id),
                host=ip,
                port=port,
                weight=weight,
                healthy=healthy,
                enabled=_as_bool(host.get("enabled"), True),
                metadata=validation.as_metadata(host.get("metadata")),
                cluster=cluster,
                status="UP" if healthy else "DOWN",
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            given_id = host.get("instanceId") if isinstance(host, Mapping) else None
            return validation.skipped(service, given_id, exc)

    def _list_instances_v1(self, service: str) -> list[RegistryInstance | SkippedInstance]:
        # Client listing: disabled instances are filtered out by the server. When the healthy
        # ratio falls to the protect threshold, 2.x returns unhealthy hosts marked healthy and
        # sets reachProtectionThreshold; health flags are then optimistic.
        what = f"list instances of {service!r}"
        response = self._call(
            "GET",
            "/v1/ns/instance/list",
            {
                "serviceName": service,
                "groupName": self.group,
                "namespaceId": self.namespace,
                "healthyOnly": "false",
            },
        )
        body = self._json(response, what)
        hosts = body.get("hosts") if isinstance(body, dict) else None
        if not isinstance(hosts, list):
            raise self._unexpected(response, what)
        return [self._to_instance(host, service) for host in hosts]

    def _v3_clusters(self, service: str) -> list[str] | None:
        """Cluster names of a service (None: no such service). The v3 admin instance list is
        per cluster and, depending on the 3.x release, a missing clusterName means "DEFAULT"
        or "all clusters"; asking the service detail first covers both."""
        what = f"read service {service!r}"
        response = self._call(
            "GET",
            "/v3/admin/ns/service",
            {"namespaceId": self.namespace, "groupName": self.group, "serviceName": service},
        )
        if self._is_not_found(response):
            return None
        detail = self._v3_data(response, what)
        clusters = detail.get("clusterMap") if isinstance(detail, dict) else None
        if clusters is None:
            return [DEFAULT_CLUSTER]
        if not isinstance(clusters, dict):
            raise self._unexpected(response, what)
        return sorted(clusters)

    def _list_instances_v3(self, service: str) -> list[RegistryInstance | SkippedInstance]:
        what = f"list instances of {service!r}"
        clusters = self._v3_clusters(service)
        if not clusters:
            return []
        found: dict[str, RegistryInstance] = {}
        skipped: list[SkippedInstance] = []
        for cluster in clusters:
            response = self._call(
                "GET",
                "/v3/admin/ns/instance/list",
                {
                    "namespaceId": self.namespace,
                    "groupName": self.group,
                    "serviceName": service,
                    "clusterName": cluster,
                    "healthyOnly": "false",
                },
            )
            if self._is_not_found(response):
                continue  # service or cluster vanished since the detail call
            hosts = self._v3_data(response, what)
            if not isinstance(hosts, list):
                raise self._unexpected(response, what)
            for host in hosts:
                instance = self._to_instance(host, service)
                if isinstance(instance, SkippedInstance):
                    skipped.append(instance)
                else:
                    found[instance.instance_id] = instance
        return [*found.values(), *skipped]

    # -- enable / disable -------------------------------------------------------------------

    def _instance_params(self, instance: RegistryInstance) -> dict[str, Any]:
        return {
            "namespaceId": self.namespace,
            "groupName": self.group,
            "serviceName": self._plain_service(instance.service),
            "ip": instance.host,
            "port": instance.port,
            "clusterName": instance.cluster or DEFAULT_CLUSTER,
        }

    def _set_enabled_v1(self, instance: RegistryInstance, enabled: bool) -> None:
        # PATCH merges only the given fields. Never the full PUT: it rebuilds the instance with
        # defaults (weight 1, metadata {}) for everything omitted.
        what = f"{'enable' if enabled else 'disable'} {instance.address} of {instance.service!r}"
        params = {**self._instance_params(instance), "enabled": "true" if enabled else "false"}
        response = self._call("PATCH", "/v1/ns/instance", params)
        if response.status_code == 404:
            raise self._http.error(response, f"failed to {what}: instance not registered")
        if not response.is_success:
            raise self._fail(response, what)
        if response.text.strip() != "ok":
            raise self._http.error(response, f"did not confirm ('ok') the request to {what}")

    def _set_enabled_v3(self, instance: RegistryInstance, enabled: bool) -> None:
        what = f"{'enable' if enabled else 'disable'} {instance.address} of {instance.service!r}"
        base = self._instance_params(instance)
        # The v3 "partial" update binds an InstanceForm whose fillDefaultValue() turns an
        # omitted weight into 1.0 (and an omitted enabled into true), so the current weight
        # must be sent back. Read it fresh from the instance detail to narrow the race with
        # another writer; the detail call also tells us when the instance is not registered.
        detail_response = self._call("GET", "/v3/admin/ns/instance", base)
        if self._is_not_found(detail_response):
            raise self._http.error(detail_response, f"failed to {what}: instance not registered")
        detail = self._v3_data(detail_response, what)
        weight = instance.weight
        if isinstance(detail, dict) and isinstance(detail.get("weight"), int | float):
            weight = float(detail["weight"])
        params = {**base, "weight": repr(float(weight)), "enabled": "true" if enabled else "false"}
        response = self._call("PUT", "/v3/admin/ns/instance/partial", params)
        if self._is_not_found(response):
            raise self._http.error(response, f"failed to {what}: instance not registered")
        if self._v3_data(response, what) != "ok":
            raise self._http.error(response, f"did not confirm ('ok') the request to {what}")
