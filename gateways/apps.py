from django.apps import AppConfig


class GatewaysConfig(AppConfig):
    name = "gateways"
    verbose_name = "Gateways and config delivery"

    def ready(self) -> None:
        # Imported here, once the app registry is ready (Django's convention for receivers).
        from django.db.models.signals import post_delete, post_save

        from gateways import generation, status_updates, tasks
        from gateways.models import Gateway
        from gateways.protocol import wakeup
        from gateways.signals import generation_made
        from policy.publishing import revision_published
        from registry_sync.signals import routable_instances_changed

        # Every policy revision and every change of the routable instance list makes a new
        # generation of the gateway document.
        revision_published.connect(
            generation.on_revision_published, dispatch_uid="gateways.generation.revision"
        )
        routable_instances_changed.connect(
            generation.on_routable_instances_changed, dispatch_uid="gateways.generation.instances"
        )
        # A new generation, in this order: deliveries are queued first (a push takes longer
        # than a poll's answer, and answering the pollers, from memory and all at once,
        # would hold this thread up), then long polls wake, then the status page follows.
        generation_made.connect(tasks.on_generation_made, dispatch_uid="gateways.deliveries")
        generation_made.connect(wakeup.on_generation_made, dispatch_uid="gateways.wakeup")
        generation_made.connect(status_updates.on_generation_made, dispatch_uid="gateways.page")
        # A gateway changed or deleted: every process forgets who its token named.
        post_save.connect(
            wakeup.on_gateway_changed, sender=Gateway, dispatch_uid="gateways.callers.save"
        )
        post_delete.connect(
            wakeup.on_gateway_changed, sender=Gateway, dispatch_uid="gateways.callers.delete"
        )
