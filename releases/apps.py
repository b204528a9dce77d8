from django.apps import AppConfig


class ReleasesConfig(AppConfig):
    name = "releases"
    verbose_name = "Progressive releases, bundles and webhooks"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from metrics.exporter import APP_COLLECTORS
        from policy.lanes import LANE_REMOVAL_GUARDS
        from releases import exporter, services, tasks

        services.release_event.connect(tasks.on_release_event, dispatch_uid="releases-webhooks")
        if services.lane_in_use not in LANE_REMOVAL_GUARDS:
            LANE_REMOVAL_GUARDS.append(services.lane_in_use)
        if exporter.COLLECTOR not in APP_COLLECTORS:
            APP_COLLECTORS.append(exporter.COLLECTOR)
