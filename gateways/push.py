"""Push mode: POST the document to the gateway, signed (gateways/signing.py). The gateway
answers 2xx `{"generation": N}` with the generation it runs; it must never go back to a
lower generation than the one it runs, so of two deliveries crossing on the wire the older
one is refused and answered with the newer number."""

import json
import threading

import httpx
from django.conf import settings

from gateways import signing
from gateways.errors import DeliveryError
from gateways.generation import Snapshot
from gateways.models import Gateway
from registry_sync.adapters._http import excerpt

_client: httpx.Client | None = None
_client_lock = threading.Lock()


def _http() -> httpx.Client:
    # One pooled client per process (keep-alive to the gateways), made after a worker forks.
    global _client
    with _client_lock:
        if _client is None:
            _client = httpx.Client(timeout=settings.GATEWAY_PUSH_TIMEOUT)
        return _client


def push(gateway: Gateway, snapshot: Snapshot) -> int:
    """Send `snapshot`; returns the generation the gateway says it runs."""
    headers = {
        "Content-Type": "application/json",
        signing.HEADER: signing.sign(gateway.push_secret, snapshot.body),
        "X-Graylane-Gateway": gateway.name,
        "X-Graylane-Generation": str(snapshot.number),
    }
    try:
        response = _http().post(gateway.endpoint, content=snapshot.body, headers=headers)
    except httpx.HTTPError as exc:
        raise DeliveryError(f"POST {gateway.endpoint}: {type(exc).__name__}: {exc}") from exc
    if not response.is_success:
        raise DeliveryError(
            f"POST {gateway.endpoint} -> HTTP {response.status_code}: {excerpt(response.text)}"
        )
    try:
        applied = json.loads(response.content)["generation"]
    except (ValueError, KeyError, TypeError):
        applied = None
    if not isinstance(applied, int) or isinstance(applied, bool):
        raise DeliveryError(
            f"POST {gateway.endpoint} answered without the generation it applied: "
            f"{excerpt(response.text)}"
        )
    return applied
