"""The pickers of services and versions of every form that names them (the release, bundle
and freeze forms, a lane's members, the policy editor's versions, the simulator's path):
the services the registries know and each one's versions, with how many of its instances
are routable, as <datalist>s (templates/dashboard/_pickers.html). static/js/pickers.js
points a version input at the list of the service typed beside it, and lets an input of
several services pick one after another. They only suggest: a value not offered is still
sent, and an unknown one refused with the form's own message."""

from collections.abc import Iterable
from dataclasses import dataclass

from django.forms import BoundField

from registry_sync.models import Service
from registry_sync.services import known_versions

SERVICE_LIST = "service-names"
# Every version of every service: for a version whose service is not chosen (or not known).
ALL_VERSIONS_LIST = "all-versions"
# Services offered, the first by name; any other may still be typed.
PICKER_SERVICES = 500


@dataclass(frozen=True)
class Pickers:
    service_names: list[str]
    # service -> version -> how many of its instances are routable
    known: dict[str, dict[str, int]]
    # service -> the id of the datalist of its versions
    list_ids: dict[str, str]

    @property
    def version_lists(self) -> list[tuple[str, str, dict[str, int]]]:
        """(datalist id, service, its versions) of every service with a version."""
        return [(self.list_ids[service], service, self.known[service]) for service in self.list_ids]

    def pair(self, service: BoundField, *versions: BoundField) -> None:
        """Make the `versions` inputs offer the versions of the service typed in `service`
        (now, and as it changes: static/js/pickers.js)."""
        service.field.widget.attrs["data-version-inputs"] = " ".join(
            version.auto_id for version in versions
        )
        self.versions_of(str(service.value() or "").strip(), *versions)

    def versions_of(self, service: str, *versions: BoundField) -> None:
        """Make the `versions` inputs offer the versions of `service` (unknown: all)."""
        for version in versions:
            version.field.widget.attrs["list"] = self.list_ids.get(service, ALL_VERSIONS_LIST)


def pickers(named: Iterable[str] = ()) -> Pickers:
    """The services the registries know and their versions, with those of the services a
    form `named` even when they are not among the first offered."""
    services = list(
        Service.objects.order_by("name").values_list("name", flat=True)[:PICKER_SERVICES]
    )
    known = known_versions({*services, *named})
    ids = {service: f"versions-{index}" for index, service in enumerate(sorted(known))}
    return Pickers(services, known, ids)
