"""A client of the Nacos 1.x naming Open API: login, register, heartbeat, deregister, list.

It speaks the documented Open API of Nacos 1.x (parameter names, `accessToken` from
`/v1/auth/login`, the beat JSON, result codes), so the same code works against a real Nacos
and against Graylane's embedded registry (`http://<dashboard>/nacos`). Every parameter goes
in the query string, as Nacos clients send them (a Nacos server reads its parameters from
the query for every method); the login's password travels in a form body and the token in
`Authorization: Bearer`, so neither shows in URLs and access logs.

`NamingClient` makes the calls; `Registration` keeps one instance registered (register,
beat at the interval the server asks for, register again when the server forgot it,
deregister on stop). The demo fleet uses both; the service SDK builds on them.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

log = logging.getLogger(__name__)

DEFAULT_NAMESPACE = "public"
DEFAULT_GROUP = "DEFAULT_GROUP"
DEFAULT_CLUSTER = "DEFAULT"
GROUP_SEPARATOR = "@@"
# Nacos' beat default and result codes (api.common.Constants, NamingResponseCode).
DEFAULT_BEAT_INTERVAL_MS = 5000
BEAT_OK, BEAT_NOT_FOUND = 10200, 20404
# Nacos' client logs in again this long before its token's ttl runs out
# (SecurityProxy: tokenRefreshWindow is a tenth of the ttl).
TOKEN_REFRESH_SHARE = 0.1
# 403 texts of a token the server no longer takes: log in again and retry once.
TOKEN_REFUSALS = ("token expired!", "token invalid!")


class RegistryError(Exception):
    """The registry refused a call or could not be reached; `status` is None when no answer
    came back."""

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status


class AccessDenied(RegistryError):
    """HTTP 403: no credentials, wrong ones, or a role that may not use the registry."""


@dataclass(frozen=True)
class Instance:
    """One instance of a service, as Nacos names its fields."""

    service: str
    ip: str
    port: int
    weight: float = 1.0
    metadata: Mapping[str, str] = field(default_factory=dict)
    cluster: str = DEFAULT_CLUSTER
    ephemeral: bool = True
    enabled: bool = True
    healthy: bool = True

    @property
    def version(self) -> str | None:
        return self.metadata.get("version")


@dataclass(frozen=True)
class BeatResult:
    interval_s: float
    found: bool  # False: the server did not know the instance (it must register again)


def _flag(value: bool) -> str:
    return "true" if value else "false"


class NamingClient:
    """Calls of one namespace and group on a Nacos server.

    `server` is the base URL including Nacos' context path, e.g. `http://127.0.0.1:8848/nacos`
    or, for the embedded registry, `http://127.0.0.1:8000/nacos`. Credentials: `username` and
    `password` (logged in on first use, again before the token expires or when the server
    refuses it), or a fixed `access_token`, or none for a Nacos without auth.
    """

    def __init__(
        self,
        server: str,
        *,
        username: str | None = None,
        password: str | None = None,
        access_token: str | None = None,
        namespace: str = DEFAULT_NAMESPACE,
        group: str = DEFAULT_GROUP,
        timeout: float = 3.0,
        login_timeout: float = 10.0,
    ):
        self.server = server.rstrip("/")
        self.namespace = namespace
        self.group = group
        self._username = username
        self._password = password
        self._token = access_token
        self._token_renew_at = float("inf") if access_token else 0.0
        # A login checks a password hash, slow on purpose (and slower on a busy server).
        self._login_timeout = login_timeout
        self._login_lock = asyncio.Lock()
        self._http = httpx.AsyncClient(timeout=timeout)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> NamingClient:
        return self

    async def __aexit__(self, *exc_info) -> None:
        await self.aclose()

    def _grouped(self, service: str) -> str:
        return f"{self.group}{GROUP_SEPARATOR}{service}"

    async def login(self) -> str:
        """POST /v1/auth/login: a new accessToken for `username` / `password`."""
        response = await self._send(
            "POST",
            "/v1/auth/login",
            data={"username": self._username or "", "password": self._password or ""},
            timeout=self._login_timeout,
        )
        body = response.json()
        ttl = float(body.get("tokenTtl") or 18000)
        self._token = body["accessToken"]
        self._token_renew_at = time.monotonic() + ttl * (1 - TOKEN_REFRESH_SHARE)
        return self._token

    async def _auth(self, *, renew: bool = False) -> dict[str, str]:
        """The credential as `Authorization: Bearer` (which Nacos' auth manager reads before
        the `accessToken` parameter): a header stays out of access logs."""
        if self._username is not None:
            async with self._login_lock:
                if renew or self._token is None or time.monotonic() >= self._token_renew_at:
                    await self.login()
        return {"Authorization": f"Bearer {self._token}"} if self._token else {}

    async def _send(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            response = await self._http.request(method, self.server + path, **kwargs)
        except httpx.HTTPError as exc:
            raise RegistryError(f"{method} {path}: {exc!r}") from exc
        if response.status_code == 403:
            raise AccessDenied(response.text.strip(), 403)
        if response.status_code >= 400:
            raise RegistryError(
                f"{method} {path}: HTTP {response.status_code} {response.text.strip()[:200]}",
                response.status_code,
            )
        return response

    async def _call(self, method: str, path: str, params: dict[str, str]) -> httpx.Response:
        try:
            return await self._send(method, path, params=params, headers=await self._auth())
        except AccessDenied as exc:
            if self._username is None or str(exc) not in TOKEN_REFUSALS:
                raise
        return await self._send(method, path, params=params, headers=await self._auth(renew=True))

    def _instance_params(self, instance: Instance) -> dict[str, str]:
        return {
            "serviceName": instance.service,
            "groupName": self.group,
            "namespaceId": self.namespace,
            "ip": instance.ip,
            "port": str(instance.port),
            "clusterName": instance.cluster,
            "ephemeral": _flag(instance.ephemeral),
        }

    async def register(self, instance: Instance) -> None:
        """POST /v1/ns/instance."""
        params = self._instance_params(instance)
        params.update(
            weight=str(instance.weight),
            enabled=_flag(instance.enabled),
            healthy=_flag(instance.healthy),
            metadata=json.dumps(dict(instance.metadata), separators=(",", ":")),
        )
        await self._call("POST", "/v1/ns/instance", params)

    async def update(self, instance: Instance) -> None:
        """PUT /v1/ns/instance: a full update (weight, enabled, metadata) of a registered
        instance; the service SDK takes an instance out of traffic with `enabled=false`
        while its heartbeats go on."""
        params = self._instance_params(instance)
        params.update(
            weight=str(instance.weight),
            enabled=_flag(instance.enabled),
            metadata=json.dumps(dict(instance.metadata), separators=(",", ":")),
        )
        await self._call("PUT", "/v1/ns/instance", params)

    async def deregister(self, instance: Instance) -> None:
        """DELETE /v1/ns/instance (Nacos answers ok also for an unknown instance)."""
        await self._call("DELETE", "/v1/ns/instance", self._instance_params(instance))

    async def beat(self, instance: Instance) -> BeatResult:
        """PUT /v1/ns/instance/beat with the beat info, as Nacos' BeatReactor sends it (the
        server may register an unknown instance from it)."""
        beat_info = {
            "serviceName": self._grouped(instance.service),
            "ip": instance.ip,
            "port": instance.port,
            "cluster": instance.cluster,
            "weight": instance.weight,
            "metadata": dict(instance.metadata),
            "scheduled": False,
            "period": DEFAULT_BEAT_INTERVAL_MS,
            "stopped": False,
        }
        params = {
            "serviceName": self._grouped(instance.service),
            "groupName": self.group,
            "namespaceId": self.namespace,
            "ephemeral": _flag(instance.ephemeral),
            "beat": json.dumps(beat_info, separators=(",", ":")),
        }
        body = (await self._call("PUT", "/v1/ns/instance/beat", params)).json()
        interval_ms = body.get("clientBeatInterval") or DEFAULT_BEAT_INTERVAL_MS
        return BeatResult(interval_s=interval_ms / 1000, found=body.get("code") != BEAT_NOT_FOUND)

    async def list_hosts(
        self, service: str, *, healthy_only: bool = False, clusters: tuple[str, ...] = ()
    ) -> list[Any]:
        """GET /v1/ns/instance/list: the enabled instances of `service`, as the registry
        wrote them (the `hosts` of the answer), for a caller that reads each on its own."""
        params = {
            "serviceName": service,
            "groupName": self.group,
            "namespaceId": self.namespace,
            "clusters": ",".join(clusters),
            "healthyOnly": _flag(healthy_only),
        }
        hosts = (await self._call("GET", "/v1/ns/instance/list", params)).json().get("hosts")
        return hosts if isinstance(hosts, list) else []

    async def list_instances(
        self, service: str, *, healthy_only: bool = False, clusters: tuple[str, ...] = ()
    ) -> list[Instance]:
        """GET /v1/ns/instance/list: the enabled instances of `service`."""
        return [
            Instance(
                service=service,
                ip=host["ip"],
                port=int(host["port"]),
                weight=float(host.get("weight", 1.0)),
                metadata={str(k): str(v) for k, v in (host.get("metadata") or {}).items()},
                cluster=host.get("clusterName") or DEFAULT_CLUSTER,
                ephemeral=bool(host.get("ephemeral", True)),
                enabled=bool(host.get("enabled", True)),
                healthy=bool(host.get("healthy", True)),
            )
            for host in await self.list_hosts(service, healthy_only=healthy_only, clusters=clusters)
        ]


class Registration:
    """Keeps `instance` registered while running: registers (retrying until the registry
    answers), beats at the interval the server asks for, registers again when a beat finds
    the instance unknown, and deregisters on `stop()`. A registry that is down is retried,
    never fatal: the service goes on serving."""

    retry_s = 1.0

    def __init__(self, client: NamingClient, instance: Instance):
        self.client = client
        self.instance = instance
        self.registered = asyncio.Event()
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=f"registration {self.instance.port}")

    async def stop(self) -> None:
        """Stop beating and deregister: also when no registration was confirmed yet (one
        may have reached the server), which Nacos answers ok for an unknown instance."""
        if self._task is None:
            return
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)
        self._task = None
        try:
            await self.client.deregister(self.instance)
        except RegistryError as exc:
            log.warning("could not deregister %s: %s", self.instance, exc)
        self.registered.clear()

    async def _run(self) -> None:
        while True:
            try:
                if not self.registered.is_set():
                    await self.client.register(self.instance)
                    self.registered.set()
                result = await self.client.beat(self.instance)
            except RegistryError as exc:
                log.warning("registry: %s; retrying in %.0f s", exc, self.retry_s)
                await asyncio.sleep(self.retry_s)
                continue
            if not result.found:
                self.registered.clear()
                continue
            await asyncio.sleep(result.interval_s)
