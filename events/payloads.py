"""The JSON of the live events that carry what an API serializer shows, one TypedDict per
serializer: the pages get the same fields as the REST API. The serializers belong to the
apps above this package, so they are not imported here; tests/test_live_event_fields.py
holds each TypedDict to its serializer (the same field names, values of these types)."""

from typing import Any, TypedDict


class InstanceFields(TypedDict):
    """registry_sync.serializers.InstanceSerializer"""

    id: int
    instance_id: str
    host: str
    port: int
    version: str | None
    state: str
    healthy: bool
    enabled: bool
    weight: float
    metadata: dict[str, str]
    last_seen: str | None
    offline_intent: bool
    drain_until: str | None
    note: str


class GatewayStatusFields(TypedDict):
    """gateways.serializers.GatewayStatusSerializer"""

    name: str
    mode: str
    endpoint: str
    status: str
    desired_generation: int
    desired_revision: int | None
    acked_generation: int
    acked_revision: int | None
    last_seen: str | None
    last_error: str
    skipped: list[dict[str, str]]
    attempts: int
    engine: str | None
    engine_version: str | None
    fronts: list[str]
    refused_samples: int
    last_refused: dict[str, int]
    last_refused_at: str | None


class RevisionFields(TypedDict):
    """policy.serializers.RevisionSerializer"""

    revision: int
    checksum: str
    created_at: str
    author: str
    comment: str
    source: str


class ReleaseFields(TypedDict):
    """releases.serializers.ReleaseSerializer"""

    id: int
    service: str
    from_version: str
    to_version: str
    lane: str
    state: str
    step: int
    steps: list[dict[str, Any]]
    analysis: dict[str, Any]
    mirror: dict[str, Any] | None
    created_by: str
    created_at: str
    updated_at: str
    allowed_actions: list[str]
    bundle: int | None
    scheduled_at: str | None
    depends_on: list[str]


class ReleaseEventFields(TypedDict):
    """releases.serializers.ReleaseEventSerializer"""

    at: str
    kind: str
    step: int
    detail: dict[str, Any]
