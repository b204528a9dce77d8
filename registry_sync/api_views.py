from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import generics, mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from registry_sync.models import Instance, Registry, Service
from registry_sync.serializers import InstanceSerializer, RegistrySerializer
from registry_sync.services import (
    bring_online,
    create_registry,
    delete_registry,
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
