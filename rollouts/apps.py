from django.apps import AppConfig


class RolloutsConfig(AppConfig):
    name = "rollouts"
    verbose_name = "Releases (progressive delivery)"
    default_auto_field = "django.db.models.BigAutoField"
