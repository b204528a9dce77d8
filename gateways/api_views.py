from typing import Any

from django.utils import timezone
from drf_spectacular.utils import extend_schema
from rest_framework import status, viewsets
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.roles import ADMIN
from gateways import generation, services
from gateways.models import Gateway
from gateways.serializers import CreatedGatewaySerializer, GatewaySerializer


class GatewayViewSet(viewsets.ModelViewSet):
    """Gateways, the generation each one runs, and its delivery status. Viewers read; admins
    create, change and delete. A create answers the gateway's token and push secret once.
    Gateways themselves call the endpoints of gateways/protocol/ (config and ack)."""

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
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        gateway, token, secret = services.create_gateway(
            serializer.validated_data, actor=request.user.username
        )
        # The context read before the change: the answer needs no database after the commit.
        answer = CreatedGatewaySerializer(gateway, context={**serializer.context, "token": token})
        return Response(answer.data, status=status.HTTP_201_CREATED)

    def perform_update(self, serializer):
        serializer.instance = services.update_gateway(
            serializer.instance, serializer.validated_data, actor=self.request.user.username
        )

    def perform_destroy(self, instance):
        services.delete_gateway(instance, actor=self.request.user.username)
