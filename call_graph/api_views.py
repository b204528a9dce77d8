from typing import Any

from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import generics, status
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.permissions import ServiceWritesPermission
from call_graph import services
from call_graph.models import CallEdge
from call_graph.serializers import (
    CallEdgeQuerySerializer,
    CallEdgeReportSerializer,
    CallEdgeSerializer,
)


class CallEdgesView(generics.ListAPIView):
    """Calls between services, per minute and edge, as the service SDK reports them."""

    permission_classes = [ServiceWritesPermission]
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
