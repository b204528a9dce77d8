"""`/api/v1/webhooks/`: operators manage their own webhooks, admins all. Another's webhook
is not found (404), as it is not listed: its name and URL are none of the caller's business."""

from typing import cast

from django.contrib.auth.models import User
from django.db.models import QuerySet
from rest_framework import viewsets
from rest_framework.serializers import BaseSerializer

from accounts.roles import OPERATOR
from releases import webhook_owners
from releases.models import Webhook
from releases.webhook_serializers import WebhookSerializer


class WebhookViewSet(viewsets.ModelViewSet):
    """Where release notifications go: an operator's own webhooks (an admin's: all)."""

    serializer_class = WebhookSerializer
    read_role = OPERATOR
    write_role = OPERATOR

    def get_queryset(self) -> QuerySet[Webhook]:
        return webhook_owners.visible_to(self.request.user)

    def perform_create(self, serializer: BaseSerializer) -> None:
        serializer.instance = webhook_owners.create_webhook(
            # RolePermission let only a signed-in operator this far.
            serializer.validated_data,
            owner=cast(User, self.request.user),
        )

    def perform_update(self, serializer: BaseSerializer) -> None:
        serializer.instance = webhook_owners.update_webhook(
            cast(Webhook, serializer.instance),
            serializer.validated_data,
            actor=self.request.user.username,
        )

    def perform_destroy(self, instance: Webhook) -> None:
        webhook_owners.delete_webhook(instance, actor=self.request.user.username)
