"""Managing webhooks through the API: operators their own, admins all (one without an
owner is the admins' only). Every change is audited; a URL's path and query are not (a
Slack URL's path is its credential), only its host and that it changed."""

from urllib.parse import urlsplit

from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import QuerySet

from accounts.models import AnyUser
from accounts.roles import ADMIN, has_role
from audit import log as audit_log
from releases.models import Webhook


def visible_to(user: AnyUser) -> QuerySet[Webhook]:
    """The webhooks `user` may see and change: admins all, others their own."""
    webhooks = Webhook.objects.select_related("owner").order_by("name")
    return webhooks if has_role(user, ADMIN) else webhooks.filter(owner_id=user.pk)


def _view(webhook: Webhook) -> dict[str, object]:
    return {
        "name": webhook.name,
        "url_host": urlsplit(webhook.url).hostname,
        "kind": webhook.kind,
        "enabled": webhook.enabled,
        "owner": webhook.owner.get_username() if webhook.owner else None,
        "has_secret": bool(webhook.secret),
    }


def _audit(actor: str, action: str, webhook: Webhook, before: object, after: object) -> None:
    audit_log.record(
        actor=actor,
        source="api",
        action=action,
        object_label=f"webhook {webhook.name}",
        before=before,
        after=after,
    )


def create_webhook(fields: dict, *, owner: User) -> Webhook:
    with transaction.atomic():
        webhook = Webhook.objects.create(**fields, owner=owner)
        _audit(owner.get_username(), "webhook.create", webhook, None, _view(webhook))
    return webhook


def update_webhook(webhook: Webhook, fields: dict, *, actor: str) -> Webhook:
    with transaction.atomic():
        before = _view(webhook)
        changed = {
            name: True
            for name in ("url", "secret")
            if name in fields and fields[name] != getattr(webhook, name)
        }
        for field, value in fields.items():
            setattr(webhook, field, value)
        webhook.save()
        after = {**_view(webhook), **{f"{name}_changed": True for name in changed}}
        _audit(actor, "webhook.update", webhook, before, after)
    return webhook


def delete_webhook(webhook: Webhook, *, actor: str) -> None:
    with transaction.atomic():
        _audit(actor, "webhook.delete", webhook, _view(webhook), None)
        webhook.delete()
