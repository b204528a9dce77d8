"""A client-side balancer for calls to one service: instances from the registry (Nacos naming
API: a real Nacos or the dashboard's embedded registry), picked by the request's gray flag
with the gateway's engine (routing_engine.select_instances, SmoothWeightedRoundRobin).

    users = ServiceBalancer(naming_client, "order-app", prod="V1", gray="V2")
    await users.start()
    response = await users.request("GET", "/order-app/hello")     # flag of the current request

* The instance list is read in the background every `refresh_s`; a registry that fails
  leaves the last list in use (stale beats none: the instances are likely still there).
* Each entry of the list is read on its own with the gateway's rules for an instance
  (routing_engine.records): one that cannot be used is left out and listed in `skipped`
  (and logged when that list changes), the others are used; one without a usable
  `version` takes requests without a flag (ALL) only.
* Routable: enabled (Nacos lists only those) and healthy. An instance that answered the
  shutting-down marker or refused the connection is avoided until the list has been read
  twice more, and the request goes to another instance (at most `attempts` in all): both
  answers mean the request was not processed, so retrying cannot run it twice (so does a
  pooled connection closed under an idempotent request).
* Versions: the prod and gray version come from configuration (`prod`, `gray`,
  `set_versions`), not from the dashboard's gateway document, which takes a gateway token
  that services do not hold. The dashboard's per-service overrides are applied by whoever
  deploys the service (README: GRAYLANE_PROD_VERSION / GRAYLANE_GRAY_VERSION).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from typing import Any

import httpx

from dataplane.registry_client import NamingClient, RegistryError
from routing_engine import ALL, SmoothWeightedRoundRobin, instance_key, select_instances
from routing_engine.records import Instance, Skipped, read_instances

from .flag import BAGGAGE_HEADER, HEADER, current_flag, flag_headers
from .lifecycle import SHUTTING_DOWN_HEADER

log = logging.getLogger(__name__)

DEFAULT_REFRESH_S = 1.0
DEFAULT_ATTEMPTS = 3
IDEMPOTENT = frozenset(("GET", "HEAD", "OPTIONS", "PUT", "DELETE"))


class NoInstance(Exception):
    """No routable instance of the service for the request's flag."""


def _record(host: Any) -> Any:
    """A Nacos host entry as an instance record of a gateway document."""
    if not isinstance(host, Mapping):
        return host
    metadata = host.get("metadata")
    instance_id = host.get("instanceId")
    if not isinstance(instance_id, str) or not instance_id:
        instance_id = f"{host.get('ip')}#{host.get('port')}"
    return {
        "id": instance_id,
        "host": host.get("ip"),
        "port": host.get("port"),
        "version": metadata.get("version") if isinstance(metadata, Mapping) else None,
        "weight": host.get("weight", 1.0),
    }


def _routable(host: Any) -> bool:
    """Healthy and enabled (Nacos lists only enabled ones, unless asked otherwise)."""
    return isinstance(host, Mapping) and all(
        host.get(flag, True) is True for flag in ("healthy", "enabled")
    )


def is_shutting_down(response: httpx.Response) -> bool:
    return (
        response.status_code == 503
        and response.headers.get(SHUTTING_DOWN_HEADER, "").lower() == "true"
    )


class ServiceBalancer:
    def __init__(
        self,
        registry: NamingClient,
        service: str,
        *,
        prod: str = "V1",
        gray: str = "V2",
        fallback_to_prod: bool = True,
        refresh_s: float = DEFAULT_REFRESH_S,
        attempts: int = DEFAULT_ATTEMPTS,
        http: httpx.AsyncClient | None = None,
    ):
        self.registry = registry
        self.service = service
        self.prod, self.gray = prod, gray
        self.fallback_to_prod = fallback_to_prod
        self.refresh_s = refresh_s
        self.attempts = attempts
        self.instances: list[Instance] = []  # the routable ones
        self.skipped: list[Skipped] = []  # entries of the last list that cannot be used
        self.stale = False
        self._http = http or httpx.AsyncClient(timeout=5.0)
        self._own_http = http is None
        self._round_robin = SmoothWeightedRoundRobin()
        self._avoid: dict[Any, float] = {}
        self._task: asyncio.Task | None = None

    def set_versions(self, prod: str, gray: str) -> None:
        self.prod, self.gray = prod, gray

    async def refresh(self) -> None:
        try:
            listed = await self.registry.list_hosts(self.service)
        except RegistryError as exc:
            if not self.stale:
                log.warning("%s: registry failed, keeping %d instances: %s", self.service,
                            len(self.instances), exc)  # fmt: skip
            self.stale = True
            return
        self.stale = False
        records = [_record(host) for host in listed]
        instances, skipped = read_instances(f"services.{self.service}", records)
        if skipped != self.skipped:
            for entry in skipped:
                log.warning("%s: skipped %s: %s", self.service, entry.record, entry.reason)
        self.skipped = skipped
        routable = {r["id"] for r, host in zip(records, listed, strict=True) if _routable(host)}
        self.instances = [instance for instance in instances if instance.id in routable]

    async def start(self) -> None:
        """Read the list once (so the first call has instances), then keep it fresh."""
        await self.refresh()
        self._task = asyncio.create_task(self._keep_fresh(), name=f"balancer {self.service}")

    async def _keep_fresh(self) -> None:
        while True:
            await asyncio.sleep(self.refresh_s)
            await self.refresh()

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        if self._own_http:
            await self._http.aclose()

    def pick(self, flag: str | None = None, exclude: frozenset = frozenset()) -> Mapping | None:
        """An instance for `flag` (default: the current request's; none means ALL)."""
        now = time.monotonic()
        candidates = [
            instance
            for instance in self.instances
            if instance_key(instance) not in exclude
            and self._avoid.get(instance_key(instance), 0.0) <= now
        ]
        _, chosen = select_instances(
            candidates,
            flag or current_flag() or ALL,
            self.prod,
            self.gray,
            fallback_to_prod=self.fallback_to_prod,
        )
        return self._round_robin.pick(chosen)

    def _avoid_for_now(self, instance: Mapping) -> None:
        self._avoid[instance_key(instance)] = time.monotonic() + 2 * self.refresh_s

    async def request(
        self, method: str, path: str, *, flag: str | None = None, **kwargs: Any
    ) -> httpx.Response:
        """Send to an instance picked for the flag, with the flag on; on the shutting-down
        marker or a refused connection, again on another instance. NoInstance when none is
        left; the last marker answer when every attempt met one."""
        flag = flag or current_flag()
        headers = {
            name.lower(): value for name, value in (kwargs.pop("headers", None) or {}).items()
        }
        if flag is not None:
            headers.pop(HEADER.lower(), None)
            headers.update(flag_headers(flag, headers.pop(BAGGAGE_HEADER, None)))
        tried: set = set()
        last: httpx.Response | None = None
        for _ in range(self.attempts):
            instance = self.pick(flag, frozenset(tried))
            if instance is None:
                break
            tried.add(instance_key(instance))
            url = f"http://{instance['host']}:{instance['port']}{path}"
            try:
                response = await self._http.request(method, url, headers=headers, **kwargs)
            except httpx.ConnectError:
                self._avoid_for_now(instance)
                continue
            except httpx.RemoteProtocolError:
                # A pooled connection the instance closed as it left: nothing was processed
                # if the method is idempotent, so only then is it safe to try again.
                if method.upper() not in IDEMPOTENT:
                    raise
                self._avoid_for_now(instance)
                continue
            if not is_shutting_down(response):
                return response
            self._avoid_for_now(instance)
            last = response
        if last is not None:
            return last
        raise NoInstance(f"no routable {self.service} instance for {flag or ALL}")
