"""contract fake: not Eureka. It serves the documented Eureka REST operations and nothing more.

Test code only. ``FakeEureka`` is an in-memory Eureka registry behind a real HTTP server on
127.0.0.1 answering the REST operations, codes and JSON codec shape of the Eureka protocol
as documented (taken from the Eureka server source and its REST operations page):
``/eureka/apps`` and (Spring Cloud's rewrite) ``/eureka/v2/apps``, one app, one instance,
register (204) / renew / deregister, status override ``PUT``/``DELETE .../status``, metadata
update, with the documented 400/404/500 answers.

* JSON only when the ``Accept`` header contains ``json``; otherwise a small XML body.
* App names are upper-cased server-side.
* ``single_object_quirk=True`` renders a lone application / lone instance as an object instead
  of a one-element list (as some Eureka JSON codecs do).
* With ``username``/``password`` set, requests need HTTP basic auth (Spring Security style 401).
"""

from __future__ import annotations

import base64
import copy
import time
from collections import Counter
from typing import Any
from xml.sax.saxutils import escape

from .http_fake import (
    FakeHTTPServer,
    FakeRequest,
    FakeResponse,
    empty_reply,
    json_reply,
    text_reply,
)

STATUSES = ("UP", "DOWN", "STARTING", "OUT_OF_SERVICE", "UNKNOWN")
DATA_CENTER = {"@class": "com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo", "name": "MyOwn"}
EMPTY_MAP = {"@class": "java.util.Collections$EmptyMap"}


def _now_ms() -> int:
    return int(time.time() * 1000)


def _to_xml(tag: str, value: Any) -> str:
    if isinstance(value, dict):
        inner = "".join(_to_xml(k, v) for k, v in value.items() if not k.startswith("@"))
        return f"<{tag}>{inner}</{tag}>"
    if isinstance(value, list):
        return "".join(_to_xml(tag, item) for item in value)
    return f"<{tag}>{escape(str(value))}</{tag}>"


class FakeEureka(FakeHTTPServer):
    """In-memory Eureka server over real HTTP; see the module docstring."""

    context_path = "/eureka"

    def __init__(
        self,
        username: str | None = None,
        password: str | None = None,
        single_object_quirk: bool = False,
    ):
        super().__init__()
        self.username = username
        self.password = password
        self.single_object_quirk = single_object_quirk
        self.apps: dict[str, dict[str, dict[str, Any]]] = {}  # APP -> id -> served JSON
        self._overrides: dict[tuple[str, str], str] = {}  # kept across re-registration

    # -- test helpers -----------------------------------------------------------------------

    def add_instance(
        self,
        app: str,
        instance_id: str | None = None,
        ip: str = "10.0.0.5",
        port: int = 8080,
        status: str = "UP",
        metadata: dict[str, str] | None = None,
        host_name: str | None = None,
        vip_address: str | None = None,
    ) -> dict[str, Any]:
        """Register an instance directly (as a Spring Cloud client would); returns a copy."""
        app_name = app.upper()
        instance_id = instance_id or f"{ip}:{app.lower()}:{port}"
        body = self._instance_body(
            app_name, instance_id, ip, port, status, metadata or {}, host_name, vip_address
        )
        with self.lock:
            self._store(app_name, body)
            return copy.deepcopy(self.apps[app_name][instance_id])

    def remove_instance(self, app: str, instance_id: str) -> bool:
        with self.lock:
            self._overrides.pop((app.upper(), instance_id), None)  # cancel drops the override
            removed = self.apps.get(app.upper(), {}).pop(instance_id, None) is not None
            if app.upper() in self.apps and not self.apps[app.upper()]:
                del self.apps[app.upper()]
            return removed

    def instance(self, app: str, instance_id: str) -> dict[str, Any] | None:
        """A copy of the stored instance JSON (None if absent), for assertions."""
        with self.lock:
            return copy.deepcopy(self.apps.get(app.upper(), {}).get(instance_id))

    # -- shapes -----------------------------------------------------------------------------

    @staticmethod
    def _instance_body(
        app: str,
        instance_id: str,
        ip: str,
        port: int,
        status: str,
        metadata: dict[str, str],
        host_name: str | None,
        vip_address: str | None,
    ) -> dict[str, Any]:
        vip = vip_address or app.lower()
        now = _now_ms()
        return {
            "instanceId": instance_id,
            "hostName": host_name or ip,
            "app": app,
            "ipAddr": ip,
            "status": status,
            "overriddenStatus": "UNKNOWN",
            "port": {"$": port, "@enabled": "true"},
            "securePort": {"$": 443, "@enabled": "false"},
            "countryId": 1,
            "dataCenterInfo": dict(DATA_CENTER),
            "leaseInfo": {
                "renewalIntervalInSecs": 30,
                "durationInSecs": 90,
                "registrationTimestamp": now,
                "lastRenewalTimestamp": now,
                "evictionTimestamp": 0,
                "serviceUpTimestamp": now,
            },
            "metadata": dict(metadata),
            "homePageUrl": f"http://{ip}:{port}/",
            "statusPageUrl": f"http://{ip}:{port}/actuator/info",
            "healthCheckUrl": f"http://{ip}:{port}/actuator/health",
            "vipAddress": vip,
            "secureVipAddress": vip,
            "isCoordinatingDiscoveryServer": "false",
            "lastUpdatedTimestamp": str(now),
            "lastDirtyTimestamp": str(now),
            "actionType": "ADDED",
        }

    def _store(self, app: str, body: dict[str, Any]) -> None:
        instance_id = body["instanceId"]
        override = self._overrides.get((app, instance_id))
        if override:
            body["overriddenStatus"] = override
            body["status"] = override
        self.apps.setdefault(app, {})[instance_id] = body

    def _render_instance(self, body: dict[str, Any]) -> dict[str, Any]:
        rendered = copy.deepcopy(body)
        if not rendered.get("metadata"):
            rendered["metadata"] = dict(EMPTY_MAP)
        return rendered

    def _render_app(self, app: str) -> dict[str, Any]:
        instances: Any = [self._render_instance(b) for b in self.apps[app].values()]
        if self.single_object_quirk and len(instances) == 1:
            instances = instances[0]
        return {"name": app, "instance": instances}

    def _render_apps(self) -> dict[str, Any]:
        counts = Counter(b["status"] for app in self.apps.values() for b in app.values())
        hashcode = "".join(f"{status}_{counts[status]}_" for status in sorted(counts))
        applications: Any = [self._render_app(app) for app in sorted(self.apps)]
        if self.single_object_quirk and len(applications) == 1:
            applications = applications[0]
        return {
            "applications": {
                "versions__delta": "1",
                "apps__hashcode": hashcode,
                "application": applications,
            }
        }

    @staticmethod
    def _reply(request: FakeRequest, payload: dict[str, Any]) -> FakeResponse:
        if "json" in request.header("accept").lower():
            return json_reply(payload)
        ((root, value),) = payload.items()
        xml = '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>' + _to_xml(root, value)
        return text_reply(xml, content_type="application/xml")

    # -- routing ----------------------------------------------------------------------------

    def handle(self, request: FakeRequest) -> FakeResponse:
        path = request.path
        if not path.startswith(self.context_path + "/"):
            return empty_reply(404)
        segments = [s for s in path[len(self.context_path) :].split("/") if s]
        if segments[:1] == ["v2"]:  # Spring Cloud rewrites /eureka/x to /eureka/v2/x
            segments = segments[1:]
        if self.username is not None and not self._authorized(request):
            response = text_reply("Unauthorized", 401)
            response.headers["WWW-Authenticate"] = 'Basic realm="Realm"'
            return response
        method = request.method
        if segments == ["apps"] and method == "GET":
            return self._reply(request, self._render_apps())
        if len(segments) == 2 and segments[0] == "instances" and method == "GET":
            for instances in self.apps.values():
                if segments[1] in instances:
                    return self._reply(
                        request, {"instance": self._render_instance(instances[segments[1]])}
                    )
            return empty_reply(404)
        if not segments or segments[0] != "apps" or len(segments) > 4:
            return empty_reply(404)
        app = segments[1].upper()
        if len(segments) == 2:
            if method == "GET":
                if app not in self.apps:
                    return empty_reply(404)
                return self._reply(request, {"application": self._render_app(app)})
            if method == "POST":
                return self._register(request, app)
            return empty_reply(405)
        instance_id = segments[2]
        record = self.apps.get(app, {}).get(instance_id)
        if len(segments) == 3:
            if method == "GET":
                if record is None:
                    return empty_reply(404)
                return self._reply(request, {"instance": self._render_instance(record)})
            if record is None:
                return empty_reply(404)
            if method == "PUT":  # heartbeat
                record["leaseInfo"]["lastRenewalTimestamp"] = _now_ms()
                return empty_reply(200)
            if method == "DELETE":
                self.remove_instance(app, instance_id)
                return empty_reply(200)
            return empty_reply(405)
        action = segments[3]
        if record is None:
            return empty_reply(404)
        if action == "status" and method == "PUT":
            return self._override(app, instance_id, record, request.params.get("value"))
        if action == "status" and method == "DELETE":
            return self._remove_override(app, instance_id, record, request.params.get("value"))
        if action == "metadata" and method == "PUT":
            record["metadata"].update(request.params)
            return empty_reply(200)
        return empty_reply(404)

    def _authorized(self, request: FakeRequest) -> bool:
        header = request.header("authorization")
        if not header.lower().startswith("basic "):
            return False
        try:
            user, _, password = base64.b64decode(header[6:]).decode().partition(":")
        except ValueError:
            return False
        return (user, password) == (self.username, self.password)

    # -- operations -------------------------------------------------------------------------

    def _register(self, request: FakeRequest, app: str) -> FakeResponse:
        try:
            payload = request.json()
        except ValueError:
            return text_reply("Unsupported body", 400)
        info = payload.get("instance") if isinstance(payload, dict) else None
        if not isinstance(info, dict):
            return text_reply("Missing instanceId", 400)
        checks = (
            ("instanceId", "Missing instanceId"),
            ("hostName", "Missing hostname"),
            ("ipAddr", "Missing ip address"),
            ("app", "Missing appName"),
        )
        for key, message in checks:
            if not info.get(key):
                return text_reply(message, 400)
        if str(info["app"]).upper() != app:
            return text_reply(f"Mismatched appName, expecting {app} but was {info['app']}", 400)
        data_center = info.get("dataCenterInfo")
        if not isinstance(data_center, dict):
            return text_reply("Missing dataCenterInfo", 400)
        if not data_center.get("name"):
            return text_reply("Missing dataCenterInfo Name", 400)
        port = info.get("port", {"$": 80})
        body = self._instance_body(
            app,
            str(info["instanceId"]),
            str(info["ipAddr"]),
            int(port["$"] if isinstance(port, dict) else port),
            str(info.get("status") or "UP"),
            {str(k): str(v) for k, v in (info.get("metadata") or {}).items() if k != "@class"},
            str(info["hostName"]),
            info.get("vipAddress"),
        )
        body["app"] = app
        self._store(app, body)
        return empty_reply(204)

    def _override(
        self, app: str, instance_id: str, record: dict[str, Any], value: str | None
    ) -> FakeResponse:
        if value not in STATUSES:
            return empty_reply(500)  # InstanceStatus.valueOf fails -> caught -> 500
        self._overrides[(app, instance_id)] = value
        record["overriddenStatus"] = value
        record["status"] = value
        record["lastUpdatedTimestamp"] = str(_now_ms())
        record["actionType"] = "MODIFIED"
        return empty_reply(200)

    def _remove_override(
        self, app: str, instance_id: str, record: dict[str, Any], value: str | None
    ) -> FakeResponse:
        if value is not None and value not in STATUSES:
            return empty_reply(500)
        self._overrides.pop((app, instance_id), None)
        record["overriddenStatus"] = "UNKNOWN"
        record["status"] = value or "UNKNOWN"  # no value: the server falls back to UNKNOWN
        record["lastUpdatedTimestamp"] = str(_now_ms())
        record["actionType"] = "MODIFIED"
        return empty_reply(200)
