from django.apps import AppConfig


class GatewaysConfig(AppConfig):
    name = "gateways"
    verbose_name = "Gateways and config delivery"

    def ready(self):
        # Every policy revision and every change of the routable instance list makes a new
        # generation of the gateway document.
        from gateways import generation
        from registry_sync.signals import routable_instances_changed
        from releases.publishing import revision_published

        revision_published.connect(
            generation.on_revision_published, dispatch_uid="gateways.generation.revision"
        )
        routable_instances_changed.connect(
            generation.on_routable_instances_changed, dispatch_uid="gateways.generation.instances"
        )
