"""From a Registry record to the adapter that talks to it."""

from django.conf import settings

from registry_sync.adapters import RegistryAdapter, build_adapter
from registry_sync.embedded import EmbeddedAdapter
from registry_sync.models import Registry


def adapter_for(registry: Registry) -> RegistryAdapter:
    if registry.kind == Registry.EMBEDDED:
        return EmbeddedAdapter(registry.namespace, registry.group)
    return build_adapter(
        registry.kind,
        base_url=registry.base_url,
        namespace=registry.namespace or "public",
        group=registry.group or "DEFAULT_GROUP",
        username=registry.username,
        password=registry.password,
        api_version=registry.api_version,
        timeout=settings.REGISTRY_TIMEOUT,
        policy=settings.OUTBOUND_POLICY,
    )
