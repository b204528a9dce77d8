"""The adapter the sync reads the embedded registry with: in process, no HTTP to ourselves.
The sync finds it through registry_sync.registries, where this app plugs it in when it is
ready (apps.py): the registry_sync app is below this one."""

from embedded_registry import changes, clock
from embedded_registry.models import EmbeddedInstance
from embedded_registry.naming import is_healthy, list_instances, service_names
from registry_sync.adapters import RegistryInstance


class EmbeddedAdapter:
    """RegistryAdapter over the embedded registry of this installation."""

    lists_disabled = True

    def __init__(self, namespace: str = "public", group: str = "DEFAULT_GROUP"):
        self.namespace = namespace or "public"
        self.group = group or "DEFAULT_GROUP"

    def list_services(self) -> list[str]:
        return sorted(service_names(self.namespace, self.group))

    def list_instances(self, service: str) -> list[RegistryInstance]:
        now = clock.now()
        return [
            RegistryInstance(
                service=row.service,
                instance_id=row.instance_id,
                host=row.ip,
                port=row.port,
                weight=row.weight,
                healthy=is_healthy(row, now),
                enabled=row.enabled,
                metadata=dict(row.metadata),
                cluster=row.cluster,
                status="UP" if is_healthy(row, now) else "DOWN",
            )
            for row in list_instances(self.namespace, self.group, service, include_disabled=True)
        ]

    def set_enabled(self, instance: RegistryInstance, enabled: bool) -> None:
        EmbeddedInstance.objects.filter(
            namespace=self.namespace,
            group=self.group,
            service=instance.service,
            cluster=instance.cluster,
            ip=instance.host,
            port=instance.port,
        ).update(enabled=enabled)
        # An update sends no signal: Nacos 2.x subscribers are told here (a drain).
        changes.changed(self.namespace, self.group, instance.service)

    def close(self) -> None:
        return None
