from django.apps import AppConfig


class GraylaneConfig(AppConfig):
    """The project itself, as an app for what belongs to no other: its system checks."""

    name = "graylane"
    verbose_name = "Graylane"

    def ready(self) -> None:
        from graylane import checks  # noqa: F401  (registers them)
