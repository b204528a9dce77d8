from django.apps import AppConfig


class RegistrySyncConfig(AppConfig):
    name = "registry_sync"
    verbose_name = "Registries, services and instances"
