from django.db import transaction
from django.utils import timezone
from drf_spectacular.utils import extend_schema
from rest_framework import status, viewsets
from rest_framework.response import Response

from accounts.roles import ADMIN
from gateways import delivery, generation
from gateways.models import Gateway
from gateways.serializers import (
    DELIVERY_FIELDS,
    CreatedGatewaySerializer,
    GatewaySerializer,
)
from releases.publishing import audit

AUDITED_FIELDS = [field for field in DELIVERY_FIELDS if field != "nacos_password"]


def _audit_view(gateway: Gateway) -> dict:
    return {"name": gateway.name, **{field: getattr(gateway, field) for field in AUDITED_FIELDS}}


class GatewayViewSet(viewsets.ModelViewSet):
    """Gateways, the generation each one runs, and its delivery status. Viewers read; admins
    create, change and delete. A create answers the gateway's token and push secret once.
    Gateways themselves call gateways/gateway_api.py (config and ack)."""

    queryset = Gateway.objects.all()
    serializer_class = GatewaySerializer
    lookup_field = "name"
    lookup_value_regex = "[-a-zA-Z0-9_]+"
    write_role = ADMIN

    def get_serializer_context(self):
        return {
            **super().get_serializer_context(),
            "generation": generation.newest_number(),
            "now": timezone.now(),
        }

    @extend_schema(responses={201: CreatedGatewaySerializer})
    def create(self, request, *args, **kwargs):
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        with transaction.atomic():
            gateway, token, secret = Gateway.objects.create_with_credentials(
                **serializer.validated_data
            )
            self._audit("gateway.create", gateway, None, _audit_view(gateway))
            transaction.on_commit(lambda: self._deliver_current(gateway))
        gateway.token = token
        answer = CreatedGatewaySerializer(gateway, context=self.get_serializer_context())
        return Response(answer.data, status=status.HTTP_201_CREATED)

    def perform_update(self, serializer):
        before = {field: getattr(serializer.instance, field) for field in DELIVERY_FIELDS}
        audit_before = _audit_view(serializer.instance)
        with transaction.atomic():
            gateway = serializer.save()
            changed = {field for field, value in before.items() if getattr(gateway, field) != value}
            if changed and (gateway.delivered_by_us or "mode" in changed):
                # A new place or way to deliver: what the old one acked says nothing about it.
                reset = {"acked_generation": 0, "acked_at": None, "last_error": "", "attempts": 0}
                Gateway.objects.filter(pk=gateway.pk).update(**reset)
                for field, value in reset.items():
                    setattr(gateway, field, value)
                transaction.on_commit(lambda: self._deliver_current(gateway))
            self._audit("gateway.update", gateway, audit_before, _audit_view(gateway))

    def perform_destroy(self, instance):
        with transaction.atomic():
            self._audit("gateway.delete", instance, _audit_view(instance), None)
            instance.delete()

    def _audit(self, action_name: str, gateway: Gateway, before, after) -> None:
        audit(
            actor=self.request.user.username,
            source="api",
            action=action_name,
            object_label=f"gateway {gateway.name}",
            before=before,
            after=after,
        )

    @staticmethod
    def _deliver_current(gateway: Gateway) -> None:
        if gateway.delivered_by_us:
            newest = generation.current()
            delivery.enqueue(newest.number, newest.created_at, [gateway.pk])
