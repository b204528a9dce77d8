from django.apps import AppConfig


class RolloutsConfig(AppConfig):
    name = "rollouts"
    verbose_name = "Releases (progressive delivery)"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from rollouts import services, tasks

        services.release_event.connect(tasks.on_release_event, dispatch_uid="rollouts-webhooks")
