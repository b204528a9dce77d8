"""What both wire protocols of the embedded registry (Nacos 1.x HTTP, views.py; Nacos 2.x
gRPC, nacos_grpc/) check of an instance before it is stored and show of one that is: one
check and one shape, so an instance is the same whichever protocol registered or reads it."""

from datetime import datetime
from typing import Any

from embedded_registry import naming
from embedded_registry.models import MAX_IP_LENGTH, EmbeddedInstance
from embedded_registry.naming import InstanceKey, NamingError
from registry_sync.adapters import RegistryInstance, validation

# validation.InvalidInstance.field -> the parameter it came from
_PARAM_OF = {"service": "serviceName", "host": "ip", "cluster": "clusterName",
             "instance_id": "instanceId"}  # fmt: skip


def check_instance(key: InstanceKey, *, weight: float, metadata: dict[str, str]) -> None:
    """Refuse (400) what the sync would have to skip: the same check as for every registry
    (registry_sync/adapters/validation.py), and the lengths of the embedded table."""
    for param, value in (("namespaceId", key.namespace), ("groupName", key.group)):
        if not validation.GROUP.match(value):
            raise NamingError(f"Param '{param}' is illegal: {validation.show(value)}")
    row = EmbeddedInstance(**key.filter())
    try:
        validation.check_instance(
            RegistryInstance(
                service=key.service,
                instance_id=row.instance_id,
                host=key.ip,
                port=key.port,
                weight=weight,
                healthy=True,
                enabled=True,
                metadata=metadata,
                cluster=key.cluster,
            )
        )
    except validation.InvalidInstance as exc:
        param = _PARAM_OF.get(exc.field, exc.field)
        raise NamingError(f"Param '{param}' is illegal: {exc.reason}") from None
    if len(key.ip) > MAX_IP_LENGTH:
        raise NamingError(f"Param 'ip' is illegal: {validation.show(key.ip)} is too long")


def host_json(row: EmbeddedInstance, now: datetime) -> dict[str, Any]:
    """An instance as Nacos shows it (its Instance JSON): in the 1.x list's `hosts`, and in
    the 2.x ServiceInfo's."""
    metadata = row.metadata
    host = {
        "instanceId": row.instance_id,
        "ip": row.ip,
        "port": row.port,
        "weight": row.weight,
        "healthy": naming.is_healthy(row, now),
        "enabled": row.enabled,
        "ephemeral": row.ephemeral,
        "clusterName": row.cluster,
        "serviceName": f"{row.group}@@{row.service}",
        "metadata": metadata,
        "instanceHeartBeatInterval": naming.millis(
            metadata, "preserved.heart.beat.interval", naming.BEAT_INTERVAL_MS
        ),
        "instanceHeartBeatTimeOut": naming.millis(
            metadata, "preserved.heart.beat.timeout", naming.BEAT_TIMEOUT_MS
        ),
        "ipDeleteTimeout": naming.millis(
            metadata, "preserved.ip.delete.timeout", naming.DELETE_TIMEOUT_MS
        ),
    }
    # Nacos reports the default id generator only when metadata is empty (NON_NULL omits it).
    generator = metadata.get("preserved.instance.id.generator") or (None if metadata else "simple")
    if generator:
        host["instanceIdGenerator"] = generator
    return host
