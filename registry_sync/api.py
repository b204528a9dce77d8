from collections import Counter

from django.db.models import Count
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import generics, mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response

from registry_sync.instance_actions import bring_online, take_offline
from registry_sync.models import Instance, Registry, Service
from registry_sync.serializers import (
    InstanceSerializer,
    RegistrySerializer,
    ServiceSerializer,
    ServiceVersionsSerializer,
)
from releases.api import header_if_match, policy_error_response, stale_response
from releases.documents import effective_versions, normalize_override, with_override
from releases.publishing import StaleRevision, load_state, publish
from routing_engine import PolicyError


def service_rows(services, document) -> list[dict]:
    counts: dict[int, Counter] = {}
    for row in (
        Instance.objects.filter(service__in=services)
        .values("service_id", "state")
        .annotate(n=Count("id"))
    ):
        counts.setdefault(row["service_id"], Counter())[row["state"]] = row["n"]
    rows = []
    for service in services:
        prod, gray = effective_versions(document, service.name)
        rows.append(
            {
                "name": service.name,
                "registry": service.registry.name if service.registry_id else None,
                "prod_version": prod,
                "gray_version": gray,
                "override": document["services"].get(service.name, {}),
                "instances": dict(sorted(counts.get(service.pk, Counter()).items())),
            }
        )
    return rows


class ServiceViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Services as the registries see them, with their effective versions."""

    queryset = Service.objects.select_related("registry").order_by("name")
    serializer_class = ServiceSerializer
    lookup_field = "name"
    lookup_value_regex = "[^/]+"

    def list(self, request, *args, **kwargs):
        page = self.paginate_queryset(self.get_queryset())
        return self.get_paginated_response(service_rows(page, load_state().document))

    def retrieve(self, request, *args, **kwargs):
        return Response(service_rows([self.get_object()], load_state().document)[0])

    @extend_schema(request=ServiceVersionsSerializer, responses=ServiceSerializer)
    def partial_update(self, request, *args, **kwargs):
        service = self.get_object()
        if not isinstance(request.data, dict):
            raise ValidationError({"non_field_errors": ["Expected a JSON object."]})
        changes = dict(request.data)

        def change(document):
            override = normalize_override(document, service.name, changes)
            return with_override(document, service.name, override)

        try:
            publish(
                change,
                actor=request.user.username,
                source="api",
                action="service.versions",
                object_label=f"service {service.name}",
                audit_view=lambda doc: {"override": doc["services"].get(service.name, {})},
                expected_revision=header_if_match(request),
            )
        except PolicyError as exc:
            return policy_error_response(exc)
        except StaleRevision as exc:
            return stale_response(exc.state)
        return Response(service_rows([service], load_state().document)[0])


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
