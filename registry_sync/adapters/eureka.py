"""Netflix / Spring Cloud Eureka adapter over the REST API.

Paths, codes and the JSON codec follow the documented Eureka REST operations.

* ``base_url`` is the Eureka service URL, e.g. ``http://127.0.0.1:8761/eureka`` (Spring Cloud) or
  ``.../eureka/v2`` (Netflix war); ``/apps`` is appended to whatever it names.
* Every request sends ``Accept: application/json``: without it Eureka answers XML.
* Eureka upper-cases application names. Graylane sees lower-case service names; calls use
  ``service.upper()``, which is the server's own spelling, so ``set_enabled`` works for any
  instance returned by ``list_instances`` (and for one rebuilt from stored rows).
* "Disabled" is the ``OUT_OF_SERVICE`` status override. Such instances stay in ``/apps``, so
  ``lists_disabled`` is True.

Caching: ``list_services`` fetches ``GET /apps`` (the whole registry) once and keeps that snapshot
so the ``list_instances`` calls of the same sync pass need no further request. The snapshot is
dropped by the next ``list_services``, by ``set_enabled``, by ``close`` and after
``snapshot_ttl`` seconds; a service not in it is fetched with ``GET /apps/{APP}``. Nothing else
is cached. (Eureka itself serves reads from a 30 s response cache, so a status change may take
that long to show in listings.)
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Self
from urllib.parse import quote, urlsplit

import httpx

import outbound

from . import validation
from .base import DEFAULT_CLUSTER, RegistryInstance, SkippedInstance
from .http_transport import HttpTransport

OUT_OF_SERVICE = "OUT_OF_SERVICE"
UP = "UP"
SNAPSHOT_TTL = 30.0


def _as_list(value: Any) -> list[Any]:
    """Codec quirk: a single application/instance may be an object instead of a list."""
    if value is None:
        return []
    if isinstance(value, list):
        return value
    return [value]


def _port(raw: Any) -> int:
    """``{"$": 8080, "@enabled": "true"}`` (the JSON codec), or a bare number/string."""
    if isinstance(raw, dict):
        raw = raw.get("$")
    return validation.as_port(raw)


def _metadata(raw: Any) -> dict[str, str]:
    if isinstance(raw, dict):
        # an empty map is written as {"@class": "java.util.Collections$EmptyMap"}
        raw = {key: value for key, value in raw.items() if key != "@class"}
    return validation.as_metadata(raw)


class EurekaAdapter:
    """Registry adapter for Eureka. See the module docstring."""

    kind = "eureka"
    lists_disabled = True  # OUT_OF_SERVICE instances stay in /apps

    def __init__(
        self,
        base_url: str,
        *,
        username: str = "",
        password: str = "",
        timeout: float = 3.0,
        snapshot_ttl: float = SNAPSHOT_TTL,
        clock: Callable[[], float] = time.monotonic,
        policy: outbound.Policy = outbound.DEFAULT_POLICY,
    ):
        url = (base_url or "").strip().rstrip("/")
        parts = urlsplit(url)
        if not parts.scheme or not parts.netloc:
            raise ValueError(
                f"Eureka base_url must look like http://host:8761/eureka, got {base_url!r}"
            )
        self.base_url = url
        self.snapshot_ttl = snapshot_ttl
        self._clock = clock
        auth = (username, password) if username else None
        self._http = HttpTransport(
            "Eureka",
            timeout=timeout,
            headers={"Accept": "application/json"},
            auth=auth,
            policy=policy,
        )
        # lower-case service name -> (APP name, raw instance dicts), and when it was fetched
        self._snapshot: dict[str, tuple[str, list[Any]]] | None = None
        self._snapshot_at = 0.0

    # -- public API -------------------------------------------------------------------------

    def list_services(self) -> list[str]:
        response = self._http.send("GET", self._apps_url())
        body = self._json(response, "list applications")
        apps = body.get("applications") if isinstance(body, dict) else None
        if not isinstance(apps, dict):
            raise self._http.error(response, "answered an unexpected shape to list applications")
        snapshot: dict[str, tuple[str, list[Any]]] = {}
        for app in _as_list(apps.get("application")):
            if not isinstance(app, dict) or not app.get("name"):
                raise self._http.error(response, "answered an unexpected application entry")
            name = str(app["name"])
            snapshot[name.lower()] = (name, _as_list(app.get("instance")))
        self._snapshot = snapshot
        self._snapshot_at = self._clock()
        return sorted(snapshot)

    def list_instances(self, service: str) -> list[RegistryInstance | SkippedInstance]:
        key = service.lower()
        snapshot = self._fresh_snapshot()
        if snapshot is not None and key in snapshot:
            _app, raw_instances = snapshot[key]
            return self._map_instances(raw_instances, key)
        response = self._http.send("GET", self._apps_url(self._app_name(service)))
        if response.status_code == 404:
            return []  # unknown application
        body = self._json(response, f"read application {service!r}")
        app = body.get("application") if isinstance(body, dict) else None
        if not isinstance(app, dict):
            raise self._http.error(response, f"answered an unexpected shape for {service!r}")
        return self._map_instances(_as_list(app.get("instance")), key)

    def set_enabled(self, instance: RegistryInstance, enabled: bool) -> None:
        self._snapshot = None
        app = self._app_name(instance.service)
        url = self._apps_url(app, instance.instance_id, "status")
        if enabled:
            # Remove the override. Without value= the server leaves the instance UNKNOWN until
            # the client re-registers (and Spring Cloud only routes to UP); value=UP is the
            # documented fallback-status hint.
            response = self._http.send("DELETE", url, params={"value": UP})
            what = f"remove the {OUT_OF_SERVICE} override of {instance.instance_id!r} ({app})"
        else:
            response = self._http.send("PUT", url, params={"value": OUT_OF_SERVICE})
            what = f"set {instance.instance_id!r} ({app}) {OUT_OF_SERVICE}"
        if response.status_code == 404:
            raise self._http.error(
                response, f"failed to {what}: instance not registered (unknown app or id)"
            )
        if not response.is_success:
            raise self._http.error(response, f"failed to {what}")

    def close(self) -> None:
        self._snapshot = None
        self._http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- helpers ----------------------------------------------------------------------------

    @staticmethod
    def _app_name(service: str) -> str:
        return service.upper()

    def _apps_url(self, *segments: str) -> str:
        return "/".join([self.base_url, "apps", *(quote(s, safe=":@") for s in segments)])

    def _fresh_snapshot(self) -> dict[str, tuple[str, list[Any]]] | None:
        if self._snapshot is None:
            return None
        if self._clock() - self._snapshot_at > self.snapshot_ttl:
            self._snapshot = None
        return self._snapshot

    def _json(self, response: httpx.Response, what: str) -> Any:
        if not response.is_success:
            raise self._http.error(response, f"failed to {what}")
        content_type = response.headers.get("content-type", "")
        if "xml" in content_type or response.content.lstrip().startswith(b"<"):
            raise self._http.error(
                response,
                f"answered XML to {what} although JSON was asked for (Accept header dropped?)",
            )
        return self._http.json(response)

    def _map_instances(
        self, raw_instances: list[Any], service: str
    ) -> list[RegistryInstance | SkippedInstance]:
        """Each entry as an instance; one that cannot be read is skipped, not the listing."""
        result: list[RegistryInstance | SkippedInstance] = []
        for raw in raw_instances:
            try:
                result.append(self._to_instance(raw, service))
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                given_id = raw.get("instanceId") if isinstance(raw, dict) else None
                result.append(validation.skipped(service, given_id, exc))
        return result

    @staticmethod
    def _to_instance(raw: Any, service: str) -> RegistryInstance:
        if not isinstance(raw, dict):
            raise TypeError(f"instance is {type(raw).__name__}, not an object")
        host = validation.as_text("ipAddr", raw.get("ipAddr") or raw["hostName"])
        status = str(raw.get("status") or "UNKNOWN").upper()
        overridden = str(
            raw.get("overriddenStatus") or raw.get("overriddenstatus") or "UNKNOWN"
        ).upper()
        metadata = _metadata(raw.get("metadata"))
        return RegistryInstance(
            service=service,
            # InstanceInfo.getId(): instanceId, else hostName (pre-instanceId registrations)
            instance_id=validation.as_text("instanceId", raw.get("instanceId") or raw["hostName"]),
            host=host,
            port=_port(raw["port"]),
            # Graylane's convention for Eureka (it has no weights): metadata "weight".
            weight=validation.as_weight(metadata.get("weight")),
            healthy=status == UP,
            enabled=status != OUT_OF_SERVICE and overridden != OUT_OF_SERVICE,
            metadata=metadata,
            cluster=DEFAULT_CLUSTER,
            status=status,
        )
