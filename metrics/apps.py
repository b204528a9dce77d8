from django.apps import AppConfig
from django.conf import settings

from metrics import promql_source


class MetricsConfig(AppConfig):
    name = "metrics"
    verbose_name = "Release metrics"

    def ready(self) -> None:
        # A bad PROMETHEUS_QUERIES file stops the process at start, not a request later.
        if settings.PROMETHEUS_URL:
            promql_source.load_templates(settings.PROMETHEUS_QUERIES)
