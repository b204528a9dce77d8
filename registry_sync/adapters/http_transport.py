"""HTTP plumbing shared by the adapters: one httpx.Client, errors turned into RegistryError."""

from __future__ import annotations

import json
import ssl
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import httpx

import outbound
from outbound.answers import excerpt

from .base import RegistryError

# Query/form parameters whose values never appear in an operator-facing message.
SECRET_PARAMS = frozenset({"accesstoken", "password", "token"})


def redact_url(url: str | httpx.URL) -> str:
    """The URL with secret query values (accessToken, password) replaced by ``***``."""
    parts = urlsplit(str(url))
    if not parts.query:
        return str(url)
    pairs = [
        (key, "***" if key.lower() in SECRET_PARAMS else value)
        for key, value in parse_qsl(parts.query, keep_blank_values=True)
    ]
    return urlunsplit(parts._replace(query=urlencode(pairs)))


class HttpTransport:
    """One ``httpx.Client`` per adapter, connecting only where ``policy`` allows (a refused
    address fails as an unreachable one, with the reason); every failure below HTTP becomes
    a RegistryError."""

    def __init__(
        self,
        registry: str,
        *,
        timeout: float,
        headers: Mapping[str, str] | None = None,
        auth: httpx.Auth | tuple[str, str] | None = None,
        policy: outbound.Policy = outbound.DEFAULT_POLICY,
        verify: ssl.SSLContext | bool = True,
    ):
        self.registry = registry  # "Nacos" / "Eureka" / "Consul", used in messages
        self.timeout = timeout
        self.client = policy.client(
            verify=verify,
            timeout=timeout,
            headers=dict(headers or {}),
            auth=auth,
            follow_redirects=False,
        )

    def send(
        self,
        method: str,
        url: str,
        *,
        params: Mapping[str, Any] | None = None,
        data: Mapping[str, Any] | None = None,
        timeout: float | None = None,
    ) -> httpx.Response:
        """``timeout``: for this request instead of the client's (a blocking query waits
        longer than any other call should)."""
        limit = self.timeout if timeout is None else timeout
        with self._failures(method, url, params, limit):
            return self.client.request(method, url, params=params, data=data, timeout=limit)

    @contextmanager
    def stream(
        self, method: str, url: str, *, params: Mapping[str, Any] | None = None
    ) -> Iterator[httpx.Response]:
        """``send``, with the body read as it arrives (a Kubernetes watch), failures below
        HTTP while reading it included."""
        with (
            self._failures(method, url, params, self.timeout),
            self.client.stream(method, url, params=params) as response,
        ):
            yield response

    @contextmanager
    def _failures(
        self, method: str, url: str, params: Mapping[str, Any] | None, limit: float
    ) -> Iterator[None]:
        """Every failure below HTTP as a RegistryError naming the request (secrets hidden)."""
        shown = redact_url(httpx.URL(url, params=dict(params or {})))
        try:
            yield
        except httpx.TimeoutException as exc:
            raise RegistryError(
                f"{self.registry} did not answer within {limit:g}s: {method} {shown} "
                f"({type(exc).__name__})",
                url=shown,
            ) from exc
        except httpx.ConnectError as exc:
            raise RegistryError(
                f"cannot connect to {self.registry}: {method} {shown}: "
                f"{str(exc) or 'connection failed'}",
                url=shown,
            ) from exc
        except httpx.HTTPError as exc:
            raise RegistryError(
                f"{self.registry} request failed: {method} {shown}: {type(exc).__name__}: {exc}",
                url=shown,
            ) from exc

    def error(self, response: httpx.Response, problem: str | None = None) -> RegistryError:
        """A RegistryError describing ``response`` (method, URL, status, body excerpt)."""
        shown = redact_url(response.request.url)
        what = problem or "answered"
        return RegistryError(
            f"{self.registry} {what}: {response.request.method} {shown} -> HTTP "
            f"{response.status_code}: {excerpt(response.text)}",
            url=shown,
            status=response.status_code,
        )

    def json(self, response: httpx.Response) -> Any:
        """The JSON body of a 2xx ``response``; anything else is a RegistryError."""
        if not response.is_success:
            raise self.error(response)
        try:
            return json.loads(response.content)
        except ValueError:
            raise self.error(response, "answered non-JSON where JSON was expected") from None

    def close(self) -> None:
        self.client.close()
