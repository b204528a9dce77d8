"""One sampled request as gateways report it (docs/api.md, "Traffic samples"): the
attributes the gray decision reads, and how it went. Personal data (client IP, user):
kept only in the sample store's window, never in the database."""

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class TrafficSample:
    ts: float
    service: str
    method: str
    path: str
    ip: str
    user: str | None = None
    city: str | None = None
    # Only the headers some rule names, their names lower-cased.
    headers: dict[str, str] = field(default_factory=dict)
    status: int = 0
    latency_ms: float = 0.0

    def as_wire(self) -> dict[str, Any]:
        return {
            "ts": self.ts,
            "service": self.service,
            "method": self.method,
            "path": self.path,
            "ip": self.ip,
            "user": self.user,
            "city": self.city,
            "headers": dict(self.headers),
            "status": self.status,
            "latency_ms": self.latency_ms,
        }
