"""What registry_sync tells the rest after instances changed (always after commit): the
gateways, through `routable_instances_changed`, when the routable list of some services
changed; the live pages, through `events`, with each instance's API fields."""

from collections.abc import Iterable
from typing import cast

import events
from registry_sync.models import Instance, LifecycleEvent
from registry_sync.serializers import InstanceSerializer
from registry_sync.signals import routable_instances_changed

# Beyond this many changed instances at once, pages get one "reload" event instead of one
# event per instance.
MAX_INSTANCE_EVENTS = 100


def instances_changed(rows: list[Instance], *, registry: str = "") -> None:
    if len(rows) > MAX_INSTANCE_EVENTS:
        events.publish_best_effort(events.RegistryChanged(registry=registry, changed=len(rows)))
        return
    events.publish_best_effort(
        *(
            events.InstanceChanged(
                service=row.service.name,
                instance=cast(events.InstanceFields, dict(InstanceSerializer(row).data)),
            )
            for row in rows
        )
    )


def lifecycle_reported(row: LifecycleEvent) -> None:
    events.publish_best_effort(
        events.LifecycleReported(
            service=row.service, instance=f"{row.host}:{row.port}", event=row.event
        )
    )


def routable_changed(services: Iterable[str]) -> None:
    names = sorted(set(services))
    if names:
        routable_instances_changed.send_robust(sender=Instance, services=names)
