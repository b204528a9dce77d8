from typing import Any

from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import generics, permissions, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.roles import VIEWER, has_role, may_use_registry
from call_graph import services
from call_graph.models import CallEdge
from call_graph.serializers import (
    CallEdgeQuerySerializer,
    CallEdgeReportSerializer,
    CallEdgeSerializer,
)


class ServiceReportsViewerReads(permissions.BasePermission):
    """POST: the fleet's own credentials (a `service` user, or admin), as for the lifecycle
    events; GET: viewer."""

    def has_permission(self, request: Request, view: APIView) -> bool:
        if request.method in permissions.SAFE_METHODS:
            return has_role(request.user, VIEWER)
        return may_use_registry(request.user)


class CallEdgesView(generics.ListAPIView):
    """Calls between services, per minute and edge, as the service SDK reports them."""

    permission_classes = [ServiceReportsViewerReads]
    serializer_class = CallEdgeSerializer
    queryset = CallEdge.objects.none()

    @extend_schema(operation_id="v1_call_edges_list", parameters=[CallEdgeQuerySerializer])
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)

    def get_queryset(self) -> QuerySet[CallEdge]:
        query = CallEdgeQuerySerializer(data=self.request.query_params)
        query.is_valid(raise_exception=True)
        return services.edges(
            query.validated_data.get("since"), query.validated_data.get("service")
        )

    @extend_schema(
        operation_id="v1_call_edges_create",
        description="An instance (service token) reports the calls it made: per callee, "
        "versions, lane and time. Samples of one edge and minute add up. Any invalid sample "
        "refuses the whole request, and nothing is stored.",
        request=CallEdgeReportSerializer,
        responses={
            202: OpenApiResponse(description='`{"accepted": <samples>}`'),
            400: OpenApiResponse(description="Field messages, by sample index."),
        },
    )
    def post(self, request: Request) -> Response:
        report = CallEdgeReportSerializer(data=request.data)
        report.is_valid(raise_exception=True)
        samples = report.validated_data["samples"]
        services.record(samples)
        return Response({"accepted": len(samples)}, status=status.HTTP_202_ACCEPTED)
