"""The embedded registry's naming semantics (Nacos') over the EmbeddedInstance table. Register,
deregister and update through the naming API are audited (source `registry`); beats are
not."""

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import Q

from audit import log as audit_log
from embedded_registry import clock
from embedded_registry.models import EmbeddedInstance
from routing_engine import bounded_json

# Nacos defaults (Constants.DEFAULT_HEART_BEAT_*), overridable per instance by the
# preserved metadata keys, as in com.alibaba.nacos.api.naming.pojo.Instance.
BEAT_INTERVAL_MS = 5000
BEAT_TIMEOUT_MS = 15000
DELETE_TIMEOUT_MS = 30000
BEAT_TIMEOUT_KEY = "preserved.heart.beat.timeout"
GROUP_SEPARATOR = "@@"


MAX_ECHOED = 200


class NamingError(ValueError):
    """A request Nacos would answer with HTTP 400 and this text."""


def echo(raw: str) -> str:
    """A parameter's value in an error text, as Nacos echoes it, but shortened: no answer
    repeats a 100 KB parameter back."""
    return raw if len(raw) <= MAX_ECHOED else raw[: MAX_ECHOED - 1] + "…"


@dataclass(frozen=True)
class InstanceKey:
    namespace: str
    group: str
    service: str
    cluster: str
    ip: str
    port: int

    def filter(self) -> dict:
        return {
            "namespace": self.namespace,
            "group": self.group,
            "service": self.service,
            "cluster": self.cluster,
            "ip": self.ip,
            "port": self.port,
        }


def split_service_name(service_name: str, group: str) -> tuple[str, str]:
    """Nacos' ServiceNameFilter: `G@@svc` carries its own group."""
    if GROUP_SEPARATOR in service_name:
        group, service_name = service_name.split(GROUP_SEPARATOR, 1)
    return group, service_name


def parse_metadata(raw: str | None) -> dict:
    """JSON object or `k1=v1,k2=v2`, as UtilsAndCommons.parseMetadata accepts."""
    if raw is None or not raw.strip():
        return {}
    try:
        value = bounded_json.loads(raw)
        if isinstance(value, dict):
            return {str(k): str(v) for k, v in value.items()}
    except ValueError:  # not JSON, or nested too deep: Nacos too tries `k=v` then
        pass
    result = {}
    for pair in raw.split(","):
        key, sep, val = pair.partition("=")
        if not sep or not key.strip():
            raise NamingError(f"metadata format incorrect:{echo(raw)}")
        result[key.strip()] = val.strip()
    return result


def millis(metadata: dict, key: str, default: int) -> int:
    try:
        return int(metadata.get(key, default))
    except (TypeError, ValueError):
        return default


def beat_timeout(instance: EmbeddedInstance) -> timedelta:
    return timedelta(milliseconds=millis(instance.metadata, BEAT_TIMEOUT_KEY, BEAT_TIMEOUT_MS))


def delete_timeout(instance: EmbeddedInstance) -> timedelta:
    return timedelta(
        milliseconds=millis(instance.metadata, "preserved.ip.delete.timeout", DELETE_TIMEOUT_MS)
    )


def is_healthy(instance: EmbeddedInstance, now: datetime) -> bool:
    if not instance.ephemeral:
        return instance.healthy
    return instance.healthy and now - instance.last_beat <= beat_timeout(instance)


def timed_out(services: Iterable[tuple[str, str, str]]) -> dict[tuple[str, str, str], frozenset]:
    """Of `services` ((namespace, group, service)), the ephemeral instances that stopped
    beating: unhealthy by their beat timeout, not yet deleted by their delete timeout, as
    (ip, port, cluster) by service."""
    wanted = set(services)
    if not wanted:
        return {}
    now = clock.now()
    which = Q()
    for namespace, group, service in wanted:
        which |= Q(namespace=namespace, group=group, service=service)
    # The default timeout bounds the candidates in the database; an instance with a
    # timeout of its own is read whatever its last beat.
    late = Q(last_beat__lt=now - timedelta(milliseconds=BEAT_TIMEOUT_MS))
    rows = EmbeddedInstance.objects.filter(
        which, late | Q(metadata__has_key=BEAT_TIMEOUT_KEY), ephemeral=True, healthy=True
    )
    found: dict[tuple[str, str, str], set] = {}
    for row in rows:
        if now - row.last_beat > beat_timeout(row):
            of = (row.namespace, row.group, row.service)
            found.setdefault(of, set()).add((row.ip, row.port, row.cluster))
    return {of: frozenset(instances) for of, instances in found.items()}


def purge_expired(
    namespace: str | None, group: str | None = None, service: str | None = None
) -> int:
    """Delete ephemeral instances whose last beat is older than their delete timeout (of
    every namespace for None)."""
    now = clock.now()
    rows = EmbeddedInstance.objects.filter(ephemeral=True)
    if namespace is not None:
        rows = rows.filter(namespace=namespace)
    if group is not None:
        rows = rows.filter(group=group)
    if service is not None:
        rows = rows.filter(service=service)
    # The shortest possible delete timeout bounds the candidates; per-instance timeouts
    # decide in Python.
    candidates = rows.filter(last_beat__lt=now - timedelta(milliseconds=1000))
    expired = [i.pk for i in candidates if now - i.last_beat > delete_timeout(i)]
    if expired:
        EmbeddedInstance.objects.filter(pk__in=expired).delete()
    return len(expired)


def _audit_view(row: EmbeddedInstance) -> dict:
    return {
        "namespace": row.namespace,
        "group": row.group,
        "cluster": row.cluster,
        "weight": row.weight,
        "healthy": row.healthy,
        "enabled": row.enabled,
        "ephemeral": row.ephemeral,
        "metadata": row.metadata,
    }


def _audit(actor: str, action: str, key: InstanceKey, before: object, after: object) -> None:
    audit_log.record(
        actor=actor,
        source="registry",
        action=action,
        object_label=f"instance {key.service} {key.ip}:{key.port}"[:255],
        before=before,
        after=after,
    )


def register(
    key: InstanceKey,
    *,
    actor: str,
    weight: float,
    healthy: bool,
    enabled: bool,
    ephemeral: bool,
    metadata: dict[str, str],
) -> None:
    with transaction.atomic():
        existing = EmbeddedInstance.objects.filter(**key.filter()).first()
        before = _audit_view(existing) if existing else None
        row = _store(
            key,
            weight=weight,
            healthy=healthy,
            enabled=enabled,
            ephemeral=ephemeral,
            metadata=metadata,
        )
        _audit(actor, "instance.register", key, before, _audit_view(row))


def _store(
    key: InstanceKey,
    *,
    weight: float,
    healthy: bool,
    enabled: bool,
    ephemeral: bool,
    metadata: dict[str, str],
) -> EmbeddedInstance:
    row, _ = EmbeddedInstance.objects.update_or_create(
        **key.filter(),
        defaults={
            "weight": weight,
            "healthy": healthy,
            "enabled": enabled,
            "ephemeral": ephemeral,
            "metadata": metadata,
            "last_beat": clock.now(),
        },
    )
    return row


def deregister(key: InstanceKey, *, actor: str) -> None:
    with transaction.atomic():
        existing = EmbeddedInstance.objects.filter(**key.filter()).first()
        if existing is None:
            return  # still "ok", as in Nacos; nothing changed, nothing to audit
        existing.delete()
        _audit(actor, "instance.deregister", key, _audit_view(existing), None)


def update(
    key: InstanceKey, *, actor: str, weight: float, enabled: bool, metadata: dict[str, str]
) -> None:
    """The full update of PUT /nacos/v1/ns/instance: omitted fields take their defaults."""
    if not EmbeddedInstance.objects.filter(
        namespace=key.namespace, group=key.group, service=key.service
    ).exists():
        raise NamingError(
            f"service not found, namespace: {key.namespace}, "
            f"service: {key.group}{GROUP_SEPARATOR}{key.service}"
        )
    with transaction.atomic():
        row = EmbeddedInstance.objects.filter(**key.filter()).first()
        if row is None:
            return
        before = _audit_view(row)
        row.weight, row.enabled, row.metadata = weight, enabled, metadata
        row.save(update_fields=["weight", "enabled", "metadata"])
        _audit(actor, "instance.update", key, before, _audit_view(row))


def beat(key: InstanceKey, beat_info: dict | None) -> bool:
    """Renew an instance; with beat info an unknown instance is registered from it, as the
    server does. Returns False when the instance is unknown and there was nothing to
    register it from (the client must re-register)."""
    now = clock.now()
    with transaction.atomic():
        renewed = EmbeddedInstance.objects.filter(**key.filter()).update(last_beat=now)
        if renewed:
            EmbeddedInstance.objects.filter(**key.filter(), ephemeral=True).update(healthy=True)
            return True
        if beat_info is None:
            return False
        _store(
            key,
            weight=float(beat_info.get("weight", 1.0) or 1.0),
            healthy=True,
            enabled=True,
            ephemeral=bool(beat_info.get("ephemeral", True)),
            metadata={str(k): str(v) for k, v in (beat_info.get("metadata") or {}).items()},
        )
        return True


def counts() -> tuple[int, int]:
    """(services, instances) the registry holds, over every namespace and group, expired
    ones purged first."""
    purge_expired(None)
    instances = EmbeddedInstance.objects.all()
    services = instances.values("namespace", "group", "service").distinct().count()
    return services, instances.count()


def list_instances(
    namespace: str,
    group: str,
    service: str,
    *,
    clusters: Sequence[str] = (),
    include_disabled: bool = False,
) -> list[EmbeddedInstance]:
    purge_expired(namespace, group, service)
    rows = EmbeddedInstance.objects.filter(namespace=namespace, group=group, service=service)
    if clusters:
        rows = rows.filter(cluster__in=clusters)
    if not include_disabled:
        rows = rows.filter(enabled=True)
    return list(rows.order_by("ip", "port"))


def service_names(namespace: str, group: str) -> set[str]:
    """The services of a group with an instance that has not expired."""
    purge_expired(namespace, group)
    return set(
        EmbeddedInstance.objects.filter(namespace=namespace, group=group).values_list(
            "service", flat=True
        )
    )
