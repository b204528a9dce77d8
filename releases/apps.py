from django.apps import AppConfig


class ReleasesConfig(AppConfig):
    name = "releases"
    verbose_name = "Gray policy, revisions and audit"
