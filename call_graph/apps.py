from django.apps import AppConfig


class CallGraphConfig(AppConfig):
    name = "call_graph"
    verbose_name = "Observed calls between services"
    default_auto_field = "django.db.models.BigAutoField"
