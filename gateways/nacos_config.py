"""Nacos config center v1 Open API (`/v1/cs/configs`): publish a config and read it back.

Served by Nacos 1.x and 2.x, and by 3.x as an OPEN_API. Base URL handling, login,
token refresh and error messages are the registry adapter's (registry_sync), not repeated.
"""

import hashlib

import httpx

import outbound
from registry_sync.adapters.nacos import NacosAdapter


def md5_hex(content: bytes) -> str:
    return hashlib.md5(content).hexdigest()  # what Nacos computes; not used for security


class NacosConfigClient(NacosAdapter):
    CONFIGS = "/v1/cs/configs"

    def __init__(
        self,
        base_url: str,
        *,
        username: str = "",
        password: str = "",
        timeout: float,
        policy: outbound.Policy,
    ):
        super().__init__(
            base_url,
            username=username,
            password=password,
            api_version="v1",
            timeout=timeout,
            policy=policy,
        )

    def publish(self, data_id: str, group: str, tenant: str, content: str) -> None:
        """`POST /v1/cs/configs` as a form (the content may be too long for a query)."""
        form = {"dataId": data_id, "group": group, "content": content, "type": "yaml"}
        if tenant:
            form["tenant"] = tenant
        response = self._post_form(self.CONFIGS, form)
        if not response.is_success or response.text.strip() != "true":
            raise self._fail(response, f"publish config {data_id}")

    def stored_md5(self, data_id: str, group: str, tenant: str) -> str:
        """The md5 of the config as stored: its Content-MD5 header, else computed."""
        params = {"dataId": data_id, "group": group}
        if tenant:
            params["tenant"] = tenant
        response = self._call("GET", self.CONFIGS, params)
        if not response.is_success:
            raise self._fail(response, f"read back config {data_id}")
        return response.headers.get("Content-MD5") or md5_hex(response.content)

    def _post_form(self, path: str, form: dict) -> httpx.Response:
        # As NacosAdapter._call, with a form body: on a 403 log in again once and retry.
        for attempt in (1, 2):
            response = self._http.send(
                "POST", self._url(path), params=self._auth_params(), data=form
            )
            if response.status_code == 403 and self.username and attempt == 1:
                self._token = None
                continue
            return response
        raise AssertionError("unreachable")  # pragma: no cover
