from typing import Any

from django.http import Http404
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import generics, mixins, permissions, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.roles import may_use_registry
from registry_sync.models import Instance, LifecycleEvent, Registry, Service
from registry_sync.serializers import (
    InstanceSerializer,
    LifecycleEventSerializer,
    LifecycleQuerySerializer,
    RegistrySerializer,
)
from registry_sync.services import (
    bring_online,
    create_registry,
    delete_registry,
    lifecycle_events,
    record_lifecycle_event,
    take_offline,
    update_registry,
)


class ServiceInstancesView(generics.ListAPIView):
    serializer_class = InstanceSerializer
    queryset = Instance.objects.none()

    def get_queryset(self):
        service = get_object_or_404(Service, name=self.kwargs["name"])
        return service.instances.select_related("service__registry").order_by("host", "port")


class InstanceViewSet(mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Take an instance out of traffic (drain, then offline) and back."""

    queryset = Instance.objects.select_related("service__registry")
    serializer_class = InstanceSerializer

    @extend_schema(request=None, responses={202: InstanceSerializer})
    @action(detail=True, methods=["post"])
    def offline(self, request, pk=None):
        row = take_offline(self.get_object().pk, actor=request.user.username, source="api")
        return Response(InstanceSerializer(row).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(request=None, responses={202: InstanceSerializer})
    @action(detail=True, methods=["post"])
    def online(self, request, pk=None):
        row = bring_online(self.get_object().pk, actor=request.user.username, source="api")
        return Response(InstanceSerializer(row).data, status=status.HTTP_202_ACCEPTED)


class RegistryViewSet(viewsets.ModelViewSet):
    """Registries Graylane syncs from; admins manage them, credentials are write-only."""

    queryset = Registry.objects.order_by("name")
    serializer_class = RegistrySerializer
    write_role = "admin"

    def perform_create(self, serializer):
        serializer.instance = create_registry(
            serializer.validated_data, actor=self.request.user.username
        )

    def perform_update(self, serializer):
        serializer.instance = update_registry(
            serializer.instance, serializer.validated_data, actor=self.request.user.username
        )

    def perform_destroy(self, instance):
        delete_registry(instance, actor=self.request.user.username)


class MayReportLifecycle(permissions.BasePermission):
    """The fleet's own credentials: a `service` user (or admin), or a gateway token. A gateway
    request's user carries its `gateway` (gateways.authentication.GatewayPrincipal, a layer
    above this app, so it is recognised by that attribute rather than imported)."""

    def has_permission(self, request: Request, view: APIView) -> bool:
        user = request.user
        if not user or not user.is_authenticated:
            return False
        return may_use_registry(user) or getattr(user, "gateway", None) is not None


class LifecycleReportView(APIView):
    permission_classes = [MayReportLifecycle]

    @extend_schema(
        operation_id="v1_lifecycle_create",
        description="An instance (service token) or a gateway (gateway token) reports one "
        "step of an instance's start or shutdown.",
        request=LifecycleEventSerializer,
        responses={
            202: LifecycleEventSerializer,
            400: OpenApiResponse(description="Field messages; nothing is stored."),
        },
    )
    def post(self, request: Request) -> Response:
        serializer = LifecycleEventSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        row = record_lifecycle_event(serializer.validated_data, reporter=str(request.user))
        return Response(LifecycleEventSerializer(row).data, status=status.HTTP_202_ACCEPTED)


class ServiceLifecycleView(generics.ListAPIView):
    """The lifecycle events of a service's instances, newest first."""

    serializer_class = LifecycleEventSerializer
    queryset = LifecycleEvent.objects.none()

    @extend_schema(parameters=[LifecycleQuerySerializer])
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)

    def get_queryset(self):
        query = LifecycleQuerySerializer(data=self.request.query_params)
        query.is_valid(raise_exception=True)
        name = self.kwargs["name"]
        rows = lifecycle_events(name, query.validated_data.get("since"))
        if not rows.exists() and not Service.objects.filter(name=name).exists():
            raise Http404
        return rows
