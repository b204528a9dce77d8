"""How what a registry reports maps to the contract's instance states."""

from datetime import datetime

from registry_sync.adapters import TERMINATING, RegistryInstance
from registry_sync.models import Instance

# A service SDK registers with this metadata while it warms up (lossless deployment, see
# docs/gray-release-design.md: register only after warm-up, and show the instance as not yet
# routable until then).
WARMUP_KEY = "graylane.warmup"
ROUTABLE = Instance.UP


def observed_state(
    seen: RegistryInstance, *, offline_intent: bool, drain_until: datetime | None, now
) -> str:
    if offline_intent:
        return Instance.DRAINING if drain_until and drain_until > now else Instance.OFFLINE
    if not seen.enabled:
        return Instance.OFFLINE
    if seen.status == TERMINATING:
        return Instance.DRAINING
    if seen.status == "STARTING" or seen.metadata.get(WARMUP_KEY) == "pending":
        return Instance.STARTING
    if not seen.healthy:
        return Instance.UNHEALTHY
    return Instance.UP


def as_registry_instance(row: Instance) -> RegistryInstance:
    return RegistryInstance(
        service=row.service.name,
        instance_id=row.instance_id,
        host=row.host,
        port=row.port,
        weight=row.weight,
        healthy=row.healthy,
        enabled=row.enabled,
        metadata=dict(row.metadata),
        cluster=row.cluster,
    )
