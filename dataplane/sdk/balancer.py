"""A client-side balancer for calls to one service: instances from the registry (Nacos naming
API: a real Nacos or the dashboard's embedded registry), picked by the request's gray route
with the gateway's engine (routing_engine.select_asked, SmoothWeightedRoundRobin).

    users = ServiceBalancer(naming_client, "order-app", prod="V1", gray="V2")
    await users.start()
    response = await users.request("GET", "/order-app/hello")    # route of the current request

* With `edges` (a call_edges.CallEdgeReporter), each call is counted for the call edges: the
  version of the instance that answered (or was tried last), the request's lane, and an
  error when it answered 5xx or was not answered.

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
* Versions: a request that came through a gateway carries what it asks for at this service
  (`X-Gray-Versions`, docs/gateway-protocol.md "Lanes on the wire"): that version, its prod
  fallback, and the service's quarantined versions, which no request reaches. Without that
  header (a Nacos-mode gateway, a caller that is no gateway) the prod and gray versions come
  from configuration (`prod`, `gray`, `set_versions`), and a lane other than gray asks for
  prod: the dashboard's gateway document takes a gateway token that services do not hold.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from typing import Any

import httpx

from dataplane.registry_client import NamingClient, RegistryError
from routing_engine import ALL, GRAY, SmoothWeightedRoundRobin, instance_key
from routing_engine.balancer import select_asked
from routing_engine.hops import LANE_HEADER, VERSIONS_HEADER, Ask, ask_for
from routing_engine.lanes import GRAY_LANE
from routing_engine.records import Instance, Skipped, read_instances

from .call_edges import CallEdgeReporter
from .flag import BAGGAGE_HEADER, HEADER, Route, current_route, route_headers
from .lifecycle import SHUTTING_DOWN_HEADER

log = logging.getLogger(__name__)

DEFAULT_REFRESH_S = 1.0
DEFAULT_ATTEMPTS = 3
IDEMPOTENT = frozenset(("GET", "HEAD", "OPTIONS", "PUT", "DELETE"))


class NoInstance(Exception):
    """No routable instance of the service for the request's route."""


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
        edges: CallEdgeReporter | None = None,
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
        self.edges = edges
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

    def _asked(self, route: Route | None) -> tuple[Ask | None, frozenset[str]]:
        """(what a request of `route` asks for here, None: any version; the versions it must
        not reach)."""
        if route is None:
            return None, frozenset()
        if route.hops is not None:
            return route.hops.ask(self.service), route.hops.excluded(self.service)
        return ask_for(route.flag, route.lane, self.prod, self.gray), frozenset()

    def pick(
        self,
        flag: str | None = None,
        exclude: frozenset = frozenset(),
        *,
        route: Route | None = None,
    ) -> Mapping | None:
        """An instance for `flag` alone, else for `route`, else for the current request's route
        (none means ALL); `exclude`: instance keys not to pick."""
        now = time.monotonic()
        candidates = [
            instance
            for instance in self.instances
            if instance_key(instance) not in exclude
            and self._avoid.get(instance_key(instance), 0.0) <= now
        ]
        ask, quarantined = self._asked(_route(flag, route))
        _, chosen, _ = select_asked(candidates, ask, self.fallback_to_prod, quarantined)
        return self._round_robin.pick(chosen)

    def _avoid_for_now(self, instance: Mapping) -> None:
        self._avoid[instance_key(instance)] = time.monotonic() + 2 * self.refresh_s

    async def request(
        self,
        method: str,
        path: str,
        *,
        flag: str | None = None,
        route: Route | None = None,
        **kwargs: Any,
    ) -> httpx.Response:
        """Send to an instance picked for the route (as pick() chooses it), with the route on;
        on the shutting-down marker or a refused connection, again on another instance.
        NoInstance when none is left; the last marker answer when every attempt met one."""
        route = _route(flag, route)
        headers = {
            name.lower(): value for name, value in (kwargs.pop("headers", None) or {}).items()
        }
        if route is not None:
            for name in (HEADER, LANE_HEADER, VERSIONS_HEADER):
                headers.pop(name.lower(), None)
            headers.update(route_headers(route, headers.pop(BAGGAGE_HEADER, None)))
        tried: set = set()
        last: httpx.Response | None = None
        instance: Mapping | None = None
        for _ in range(self.attempts):
            picked = self.pick(exclude=frozenset(tried), route=route)
            if picked is None:
                break
            instance = picked
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
                    self._count(instance, route, error=True)
                    raise
                self._avoid_for_now(instance)
                continue
            except httpx.HTTPError:
                self._count(instance, route, error=True)
                raise
            if not is_shutting_down(response):
                self._count(instance, route, error=response.status_code >= 500)
                return response
            self._avoid_for_now(instance)
            last = response
        if instance is not None:  # every instance tried refused it or was leaving
            self._count(instance, route, error=True)
        if last is not None:
            return last
        flag = ALL if route is None else route.flag
        raise NoInstance(f"no routable {self.service} instance for {flag}")

    def _count(self, instance: Mapping, route: Route | None, *, error: bool) -> None:
        """One call to the instance's version, for the call edges (an instance without a
        version has none to name)."""
        if self.edges is not None and instance["version"] is not None:
            lane = (route.lane or GRAY_LANE) if route is not None and route.flag == GRAY else None
            self.edges.count(self.service, instance["version"], lane, error=error)


def _route(flag: str | None, route: Route | None) -> Route | None:
    """The route a call goes by: `flag` alone when given, else `route`, else the current
    request's."""
    if flag is not None:
        return Route(flag)
    return route if route is not None else current_route()
