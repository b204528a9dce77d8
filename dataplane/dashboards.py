"""Several dashboard URLs and failover between them, for every data-plane client of the
dashboard: the gateway's and the agent's config client and reporter, and the service SDK's
lifecycle, call-edge and replay-sample clients.

Each request goes to the URL that last answered. When it cannot be reached (an
`httpx.TransportError`: refused, reset, timed out) or answers 5xx, the same request is sent
to the next URL, once around the list; the first that answers below 500 is kept for the
requests after it. When none does, the caller gets the last error or 5xx, and does what it
did with one dashboard (a gateway keeps its cached configuration and polls again). Every
replica serves the same data (docs/deploy.md), so any of them may take any request; the
requests these clients send are all safe to send twice (the dashboard deduplicates metric
samples, acks are idempotent, the rest are reports a retry sends again anyway).

It is an httpx transport: the clients keep calling `client.get(path)` on a base URL (the
first), and the transport sends each request to the URL in use. Retrying one address (a
connection that failed) stays httpx's own business (`retries` of its transport). These
clients connect directly: `HTTP_PROXY`/`HTTPS_PROXY` would route past the failover.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import httpx

log = logging.getLogger(__name__)


def dashboard_urls(value: str | Sequence[str]) -> tuple[str, ...]:
    """The dashboard URLs of a comma-separated text (or a list of them), without their
    trailing slashes, in order; ValueError when there is none or one is not http(s)."""
    parts = value.split(",") if isinstance(value, str) else value
    urls = tuple(part.strip().rstrip("/") for part in parts if part.strip())
    if not urls:
        raise ValueError("no dashboard URL")
    for url in urls:
        try:
            parsed = httpx.URL(url)
        except httpx.InvalidURL as exc:
            raise ValueError(f"not a URL: {url!r} ({exc})") from exc
        if parsed.scheme not in ("http", "https") or not parsed.host:
            raise ValueError(f"not an http(s) URL: {url!r}")
    return urls


class FailoverTransport(httpx.AsyncBaseTransport):
    """Sends a request made on `urls[0]` to the URL in use, moving on to the next one on a
    transport error or a 5xx answer (see the module's docstring)."""

    def __init__(self, urls: Sequence[str], transport: httpx.AsyncBaseTransport | None = None):
        self.urls = [httpx.URL(url) for url in dashboard_urls(urls)]
        self.current = 0
        self._transport = transport or httpx.AsyncHTTPTransport()

    @property
    def url(self) -> str:
        """The URL in use."""
        return str(self.urls[self.current])

    def _path(self, request: httpx.Request) -> bytes | None:
        """The path (and query) of a request made on urls[0], after that URL's own path;
        None for a request elsewhere."""
        base = self.urls[0]
        prefix = base.raw_path.rstrip(b"/")
        if request.url.netloc != base.netloc or not request.url.raw_path.startswith(prefix):
            return None
        return request.url.raw_path[len(prefix) :]

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        path = self._path(request)
        if path is None:
            return await self._transport.handle_async_request(request)
        order = [(self.current + step) % len(self.urls) for step in range(len(self.urls))]
        for index in order[:-1]:
            try:
                response = await self._send(request, index, path)
            except httpx.TransportError as exc:
                self._next(index, f"cannot be reached ({type(exc).__name__}: {exc})")
                continue
            if response.status_code < 500:
                return response
            await response.aclose()
            self._next(index, f"answered {response.status_code}")
        return await self._send(request, order[-1], path)

    async def _send(self, request: httpx.Request, index: int, path: bytes) -> httpx.Response:
        base = self.urls[index]
        request.url = base.copy_with(raw_path=base.raw_path.rstrip(b"/") + path)
        request.headers["Host"] = base.netloc.decode("ascii")
        response = await self._transport.handle_async_request(request)
        if response.status_code < 500 and index != self.current:
            log.warning("The dashboard at %s answers: using it from now on.", base)
            self.current = index
        return response

    def _next(self, index: int, reason: str) -> None:
        following = self.urls[(index + 1) % len(self.urls)]
        log.warning("The dashboard at %s %s; trying %s.", self.urls[index], reason, following)

    async def aclose(self) -> None:
        await self._transport.aclose()


def dashboard_client(
    dashboards: str | Sequence[str], token: str, timeout: float = 5.0
) -> httpx.AsyncClient:
    """The HTTP client a data-plane process calls its dashboard(s) with, as `token`'s
    holder: requests on paths (`client.get("/api/v1/...")`), sent by a FailoverTransport."""
    urls = dashboard_urls(dashboards)
    return httpx.AsyncClient(
        base_url=urls[0],
        headers={"Authorization": f"Token {token}"},
        timeout=timeout,
        transport=FailoverTransport(urls),
        # An HTTP(S)_PROXY from the environment would take the requests past the failover.
        trust_env=False,
    )
