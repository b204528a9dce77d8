from django.apps import AppConfig


class ReleasesConfig(AppConfig):
    name = "releases"
    verbose_name = "Gray policy, revisions and audit"

    def ready(self):
        # Imported here, once the app registry is ready (Django's convention for receivers).
        from releases.announcements import on_revision_published
        from releases.publishing import revision_published

        revision_published.connect(on_revision_published, dispatch_uid="releases.live")
