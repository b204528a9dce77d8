from django.apps import AppConfig


class ReleasesConfig(AppConfig):
    name = "releases"
    verbose_name = "Progressive releases, bundles and webhooks"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from releases import services, tasks

        services.release_event.connect(tasks.on_release_event, dispatch_uid="releases-webhooks")
