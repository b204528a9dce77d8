"""From a Registry record to the adapter that talks to it."""

from collections.abc import Callable

from django.conf import settings

from registry_sync.adapters import RegistryAdapter, build_adapter
from registry_sync.models import Registry

# The embedded registry's adapter reads the embedded_registry app's table. That app is above
# this one (its naming API checks registrations with adapters/validation.py), so it plugs
# its adapter in here when it is ready (embedded_registry/apps.py).
_embedded: list[Callable[[str, str], RegistryAdapter]] = []


def plug_embedded(adapter: Callable[[str, str], RegistryAdapter]) -> None:
    """`adapter(namespace, group)` reads the embedded registry from now on."""
    _embedded[:] = [adapter]


def adapter_for(registry: Registry) -> RegistryAdapter:
    if registry.kind == Registry.EMBEDDED:
        return _embedded[0](registry.namespace, registry.group)
    return build_adapter(
        registry.kind,
        base_url=registry.base_url,
        namespace=registry.namespace or "public",
        group=registry.group or "DEFAULT_GROUP",
        username=registry.username,
        password=registry.password,
        api_version=registry.api_version,
        version_label=registry.version_label,
        token=registry.token,
        kubeconfig=registry.kubeconfig,
        datacenter=registry.datacenter,
        version_key=registry.version_key,
        timeout=settings.REGISTRY_TIMEOUT,
        policy=settings.OUTBOUND_POLICY,
    )
