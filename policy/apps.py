from django.apps import AppConfig


class PolicyConfig(AppConfig):
    name = "policy"
    verbose_name = "Gray policy, revisions and per-service versions"

    def ready(self) -> None:
        # Imported here, once the app registry is ready (Django's convention for receivers).
        from policy.announcements import on_revision_published
        from policy.publishing import revision_published

        revision_published.connect(on_revision_published, dispatch_uid="policy.live")
