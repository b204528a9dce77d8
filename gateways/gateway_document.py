"""The gateway document (contract "What gateways get"), built from the live policy and the
routable instances. It is built once per generation (gateways/generation.py), never per
request.

    {"generation", "revision", "checksum",
     "gray": {the policy's rules, without versions},
     "versions": {"prod", "gray"},                  # the defaults, for services not listed
     "services": {name: {"prod", "gray", "instances": [{id, host, port, version, weight}],
                         "percent", "targeted",       # only when overridden
                         "quarantined"}},             # only when the service has some
     "lanes": [{name, priority, match, members}],     # enabled lanes but gray, if any,
     "gray_priority": 1000}                           # and then the gray lane's place

Instances of a quarantined version are left out: no gateway may send them traffic.

`checksum` is the sha256 of the canonical JSON of `gray`, `versions` and `services`, so two
generations that route the same way have the same checksum and a gateway may skip reloading.
`services` lists every service the registries know plus every service with a version
override, even with no routable instance: a gateway can then tell "no instance up" (503)
from "no such service" (404). `instances` are the routable ones only (state UP); an instance
without a version has `"version": null` (it takes ALL traffic only).

Nothing a gateway would skip is sent: every instance and service name passes the rules
gateways apply (routing_engine.records). The sync stores nothing else, but rows stored
before it checked (or by hand) are left out here, and logged.
"""

import logging

from policy.documents import effective_versions
from policy.lanes import gray_priority_of, lanes_of, quarantined_of
from policy.publishing import load_state
from registry_sync.models import Instance, Service
from routing_engine import ROUTABLE_STATE, SERVICE_ROUTING_FIELDS, checksum
from routing_engine.records import RecordError, read_instance, service_name_problem

log = logging.getLogger(__name__)


def build_document(generation: int) -> dict:
    state = load_state()
    policy = state.document
    instances: dict[str, list[dict]] = {}
    rows = (
        Instance.objects.filter(state=ROUTABLE_STATE)
        .order_by("service__name", "instance_id")
        .values_list("service__name", "instance_id", "host", "port", "version", "weight")
    )
    quarantined = quarantined_of(policy)
    for service, instance_id, host, port, version, weight in rows:
        record = {"id": instance_id, "host": host, "port": port, "version": version,
                  "weight": weight}  # fmt: skip
        try:
            usable, _ = read_instance(record)
        except RecordError as exc:
            log.warning("Generation %d leaves out instance %s of %s: %s", generation,
                        instance_id, service, exc)  # fmt: skip
            continue
        record["version"] = usable.version
        if usable.version in quarantined.get(service, ()):
            continue  # no traffic at all, whatever the gateway makes of `quarantined`
        instances.setdefault(service, []).append(record)
    names = set(Service.objects.values_list("name", flat=True)) | set(policy["services"])
    services = {}
    for name in sorted(names | set(instances)):
        if service_name_problem(name):
            log.warning("Generation %d leaves out service %r: not a service name", generation, name)
            continue
        prod, gray = effective_versions(policy, name)
        services[name] = {"prod": prod, "gray": gray, "instances": instances.get(name, [])}
        override = policy["services"].get(name, {})
        for key in SERVICE_ROUTING_FIELDS:
            if key in override:
                services[name][key] = override[key]
        if quarantined.get(name):
            services[name]["quarantined"] = quarantined[name]
    content = {"gray": policy["gray"], "versions": policy["versions"], "services": services}
    lanes = [
        {"name": name, **{key: lane[key] for key in ("priority", "match", "members")}}
        for name, lane in lanes_of(policy).items()
        if lane["enabled"]
    ]
    if lanes:
        content["lanes"] = lanes
        content["gray_priority"] = gray_priority_of(policy)
    return {
        "generation": generation,
        "revision": state.revision,
        "checksum": checksum(content),
        **content,
    }
