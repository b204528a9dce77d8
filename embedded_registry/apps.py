from django.apps import AppConfig


class EmbeddedRegistryConfig(AppConfig):
    name = "embedded_registry"
    verbose_name = "Embedded registry (Nacos naming API)"

    def ready(self) -> None:
        from embedded_registry.adapter import EmbeddedAdapter
        from registry_sync import registries

        registries.plug_embedded(EmbeddedAdapter)
