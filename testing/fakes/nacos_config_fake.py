"""contract fake: not Nacos. FakeNacos (testing/fakes/nacos_fake.py) plus the documented Nacos
config center v1 Open API (`/v1/cs/configs`): publish, get (with Content-MD5), delete. Login
and token checks are FakeNacos's.

Test code only. `lose_writes = True` makes publishes answer `true` without storing anything,
as if another writer had put its own content back: reading back then shows what was there.
"""

import hashlib
import re

from .http_fake import FakeRequest, FakeResponse, text_reply
from .nacos_fake import FakeNacos

CONFIGS = "/v1/cs/configs"
VALID_NAME = re.compile(r"^[A-Za-z0-9_.:-]+$")  # ParamUtils.validChars
CONFIG_TYPES = {"properties", "xml", "json", "text", "html", "yaml", "toml", "unset"}


class FakeNacosConfig(FakeNacos):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.configs: dict[tuple[str, str, str], tuple[str, str]] = {}  # -> (content, type)
        self.lose_writes = False

    def _build_routes(self):
        routes = super()._build_routes()
        routes[("POST", CONFIGS)] = self._publish_config
        routes[("GET", CONFIGS)] = self._get_config
        routes[("DELETE", CONFIGS)] = self._delete_config
        return routes

    # -- test helpers -----------------------------------------------------------------------

    def config(self, data_id: str, group: str = "DEFAULT_GROUP", tenant: str = "") -> str | None:
        with self.lock:
            stored = self.configs.get((self._tenant(tenant), group, data_id))
            return stored[0] if stored else None

    def put_config(self, data_id: str, group: str, tenant: str, content: str) -> None:
        with self.lock:
            self.configs[(self._tenant(tenant), group, data_id)] = (content, "yaml")

    # -- endpoints --------------------------------------------------------------------------

    def _tenant(self, tenant: str) -> str:
        # 1.x/2.x store the default namespace as "" (NamespaceUtil), 3.x as "public".
        if self.version == "3.x":
            return tenant or "public"
        return "" if tenant in ("", "public") else tenant

    def _key(self, request: FakeRequest) -> tuple[str, str, str] | FakeResponse:
        for name in ("dataId", "group"):
            value = request.params.get(name)
            if value is None:
                return text_reply(f"Required parameter '{name}' is not present", 400)
            if not VALID_NAME.match(value):
                return text_reply(f"caused: invalid {name} : {value};", 400)
        tenant = request.params.get("tenant", "")
        if tenant and (not VALID_NAME.match(tenant) or len(tenant) > 128):
            return text_reply("caused: invalid tenant;", 400)
        return self._tenant(tenant), request.params["group"], request.params["dataId"]

    def _publish_config(self, request: FakeRequest) -> FakeResponse:
        key = self._key(request)
        if isinstance(key, FakeResponse):
            return key
        if "content" not in request.params:
            return text_reply("Required parameter 'content' is not present", 400)
        config_type = request.params.get("type", "")
        if not self.lose_writes:
            type_ = config_type if config_type in CONFIG_TYPES else "text"
            self.configs[key] = (request.params["content"], type_)
        return text_reply("true")

    def _get_config(self, request: FakeRequest) -> FakeResponse:
        key = self._key(request)
        if isinstance(key, FakeResponse):
            return key
        if key not in self.configs:
            return text_reply("config data not exist\n", 404)
        content, config_type = self.configs[key]
        body = content.encode()
        headers = {
            "Config-Type": config_type,
            "Content-MD5": hashlib.md5(body).hexdigest(),
            "Cache-Control": "no-cache,no-store",
        }
        return FakeResponse(200, body, "text/plain;charset=UTF-8", headers)

    def _delete_config(self, request: FakeRequest) -> FakeResponse:
        key = self._key(request)
        if isinstance(key, FakeResponse):
            return key
        self.configs.pop(key, None)
        return text_reply("true")
