"""What the replay warm-up sends to the instance itself: recent real requests of its own
service, as the gateways sampled them (the dashboard's `GET
/api/v1/traffic-samples/replay/`, with a service token whose user is bound to the
service), else the configured paths.

Only idempotent methods are replayed, whatever the dashboard answers: a warm-up must not
change anything. The samples hold personal data (users, headers); they are used for these
requests and kept nowhere.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import httpx

from dataplane.dashboards import dashboard_client

REPLAY_PATH = "/api/v1/traffic-samples/replay/"
IDEMPOTENT_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
MAX_SAMPLES = 1000  # the most the dashboard answers at once


@dataclass(frozen=True)
class WarmupRequest:
    method: str
    path: str
    headers: Mapping[str, str] = field(default_factory=dict)


class SamplesUnavailable(Exception):
    """The dashboard did not answer with samples (down, refused, or a bad answer)."""


@dataclass(frozen=True)
class SampleSource:
    """Up to `limit` recent sampled requests of the service, from `dashboard` (its URL, or
    several, comma-separated or a list: dataplane/dashboards.py) with `token`."""

    dashboard: str | Sequence[str]
    token: str
    limit: int = 100
    timeout_s: float = 5.0

    async def fetch(self, service: str) -> list[WarmupRequest]:
        """Newest first, one of each method and path before the others; empty when the
        window holds none."""
        params: dict[str, str | int] = {"service": service, "limit": self.limit}
        try:
            async with dashboard_client(self.dashboard, self.token, self.timeout_s) as client:
                response = await client.get(REPLAY_PATH, params=params)
            response.raise_for_status()
            body = response.json()
            user_header = body["user_header"]
            requests = [
                as_request(sample, user_header)
                for sample in body["samples"]
                if str(sample["method"]).upper() in IDEMPOTENT_METHODS
            ]
        except (httpx.HTTPError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise SamplesUnavailable(repr(exc)) from exc
        return distinct_first(requests)


def distinct_first(requests: Sequence[WarmupRequest]) -> list[WarmupRequest]:
    """One request of each method and path first (in their order), then the others: a
    success count spent on repeats of one popular path would leave the rest cold."""
    seen: set[tuple[str, str]] = set()
    first: list[WarmupRequest] = []
    again: list[WarmupRequest] = []
    for request in requests:
        key = (request.method, request.path)
        (again if key in seen else first).append(request)
        seen.add(key)
    return first + again


def as_request(sample: Mapping, user_header: str) -> WarmupRequest:
    """The sample as it came through the gateway: its headers, and its user in the
    policy's user header."""
    headers = {str(name): str(value) for name, value in sample.get("headers", {}).items()}
    if sample.get("user") is not None and user_header:
        headers[user_header] = str(sample["user"])
    return WarmupRequest(str(sample["method"]).upper(), str(sample["path"]), headers)


def fixed_requests(paths: Sequence[str]) -> list[WarmupRequest]:
    return [WarmupRequest("GET", path) for path in paths]
