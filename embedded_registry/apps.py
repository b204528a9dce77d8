from django.apps import AppConfig
from django.db.models.signals import post_delete, post_save


class EmbeddedRegistryConfig(AppConfig):
    name = "embedded_registry"
    verbose_name = "Embedded registry (Nacos naming API)"

    def ready(self) -> None:
        from embedded_registry import changes
        from embedded_registry.adapter import EmbeddedAdapter
        from embedded_registry.models import EmbeddedInstance
        from registry_sync import registries

        registries.plug_embedded(EmbeddedAdapter)
        # Every way an instance is stored or removed (either protocol, expiry, the admin)
        # saves or deletes a row; beats only update last_beat, which changes nothing shown.
        for signal in (post_save, post_delete):
            signal.connect(
                changes.on_instance_saved_or_deleted,
                sender=EmbeddedInstance,
                dispatch_uid=f"embedded_registry.changes.{signal is post_save}",
            )
