"""What a service's instances replay to warm up (docs/service-sdk.md): its recent sampled
idempotent requests, newest first. The one way sampled personal data (users, headers)
leaves the sample store, and only to the service's own instances."""

from typing import Any

from traffic.samples import TrafficSample
from traffic.store import store

# Replaying these changes nothing on the service; any other method could.
IDEMPOTENT_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def replayable(service: str, limit: int) -> list[TrafficSample]:
    found: list[TrafficSample] = []
    for sample in reversed(store().window(service)):
        if sample.method.upper() in IDEMPOTENT_METHODS:
            found.append(sample)
            if len(found) == limit:
                break
    return found


def as_replay(sample: TrafficSample) -> dict[str, Any]:
    return {
        "ts": sample.ts,
        "method": sample.method.upper(),
        "path": sample.path,
        "headers": dict(sample.headers),
        "user": sample.user,
    }
