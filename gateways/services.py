"""Use cases on gateways: create, change and delete them (audited), and bring a new or
moved one to the newest generation."""

from django.db import transaction

from audit import log as audit_log
from events.after_commit import after_commit
from gateways import generation, status_updates, tasks
from gateways.models import Gateway
from gateways.serializers import DELIVERY_FIELDS

# `fronts` decides whose metrics a release trusts: audited, though no delivery field.
AUDITED_FIELDS = [field for field in DELIVERY_FIELDS if field != "nacos_password"] + ["fronts"]


def _audit_view(gateway: Gateway) -> dict:
    return {"name": gateway.name, **{field: getattr(gateway, field) for field in AUDITED_FIELDS}}


def _audit(actor: str, action: str, gateway: Gateway, before, after) -> None:
    audit_log.record(
        actor=actor,
        source="api",
        action=action,
        object_label=f"gateway {gateway.name}",
        before=before,
        after=after,
    )


def create_gateway(fields: dict, *, actor: str) -> tuple[Gateway, str, str]:
    """The new gateway, its token and its push secret (shown once)."""
    with transaction.atomic():
        gateway, token, secret = Gateway.objects.create_with_credentials(**fields)
        _audit(actor, "gateway.create", gateway, None, _audit_view(gateway))
        _deliver_newest_after_commit(gateway)
    return gateway, token, secret


def update_gateway(gateway: Gateway, fields: dict, *, actor: str) -> Gateway:
    before = {field: getattr(gateway, field) for field in DELIVERY_FIELDS}
    audit_before = _audit_view(gateway)
    with transaction.atomic():
        for field, value in fields.items():
            setattr(gateway, field, value)
        gateway.save()
        changed = {field for field, value in before.items() if getattr(gateway, field) != value}
        if changed and (gateway.delivered_by_us or "mode" in changed):
            # A new place or way to deliver: what the old one acked says nothing about it.
            reset = {"acked_generation": 0, "acked_at": None, "last_error": "", "attempts": 0}
            Gateway.objects.filter(pk=gateway.pk).update(**reset)
            for field, value in reset.items():
                setattr(gateway, field, value)
            _deliver_newest_after_commit(gateway)
        _audit(actor, "gateway.update", gateway, audit_before, _audit_view(gateway))
        transaction.on_commit(lambda: status_updates.changed(gateway.pk))
    return gateway


def delete_gateway(gateway: Gateway, *, actor: str) -> None:
    with transaction.atomic():
        _audit(actor, "gateway.delete", gateway, _audit_view(gateway), None)
        gateway.delete()


def _deliver_newest_after_commit(gateway: Gateway) -> None:
    after_commit(lambda: deliver_newest(gateway), f"queuing a delivery to gateway {gateway.name}")


def deliver_newest(gateway: Gateway) -> None:
    if gateway.delivered_by_us:
        newest = generation.current()
        tasks.enqueue(newest.number, newest.created_at, [gateway.pk])
