from collections.abc import Callable
from typing import Any

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from gateways.protocol.views import GatewayReportView, report_schema
from metrics import promql_source, services
from metrics.serializers import (
    AcceptedSerializer,
    IngestSerializer,
    LatencySeriesSerializer,
    SeriesQuerySerializer,
    SuccessRateSeriesSerializer,
)


class MetricsIngestView(GatewayReportView):
    @report_schema(
        "v1_metrics_create",
        (
            "Samples a gateway saw: per service, version, lane (of GRAY requests; none for "
            "the others) and second, requests, errors and p95 latency. A sample re-sent "
            "(same gateway, service, version, lane, ts) is counted once. Any invalid sample "
            "refuses the whole request, and nothing is stored. "
            "Samples of services the gateway does not front (not in the gateway document it "
            "acked, or not in its `fronts`), or that would start a series beyond "
            "METRICS_MAX_SERIES, are refused and the rest taken: `refused` counts them by "
            "service, `refused_reasons` says why."
        ),
        IngestSerializer,
        AcceptedSerializer,
        "sample",
    )
    def post(self, request: Request) -> Response:
        gateway = self.reporter(request)
        serializer = IngestSerializer(data=request.data, context={"gateway": gateway.name})
        serializer.is_valid(raise_exception=True)
        ingested = services.ingest(gateway, serializer.to_samples())
        answer = {
            "accepted": ingested.accepted,
            "duplicates": ingested.duplicates,
            "refused": ingested.refused,
            "refused_reasons": ingested.reasons,
        }
        return Response(answer, status=status.HTTP_202_ACCEPTED)


SOURCE_FAILURES = {
    502: OpenApiResponse(description="source=prometheus: Prometheus refused a template."),
    503: OpenApiResponse(description="source=prometheus: Prometheus cannot be reached."),
}


class _SeriesView(APIView):
    def query(self, request: Request) -> dict[str, Any]:
        query = SeriesQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        return dict(query.validated_data)

    def answer(
        self, read: Callable[[str, int, int, str], services.Series], request: Request
    ) -> Response:
        q = self.query(request)
        try:
            series = read(q["service"], q["since"], q["step"], q["source"])
        except promql_source.PrometheusUnavailable as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_503_SERVICE_UNAVAILABLE)
        except promql_source.PrometheusBadAnswer as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_502_BAD_GATEWAY)
        return Response({"service": q["service"], "series": series})


class SuccessRateView(_SeriesView):
    @extend_schema(
        operation_id="v1_metrics_success_rate",
        description="Success rate per version and step, from the per-minute rollups or "
        "(source=prometheus) from Prometheus.",
        parameters=[SeriesQuerySerializer],
        responses={200: SuccessRateSeriesSerializer, **SOURCE_FAILURES},
    )
    def get(self, request: Request) -> Response:
        return self.answer(services.success_rate_series, request)


class LatencyView(_SeriesView):
    @extend_schema(
        operation_id="v1_metrics_latency",
        description=(
            "p95 latency per version and step, from the per-minute rollups: the 95th "
            "percentile of the reported p95s weighted by their requests, at the upper edge "
            "of its latency bucket (at most 19 % above). With source=prometheus: what its "
            "latency template answers."
        ),
        parameters=[SeriesQuerySerializer],
        responses={200: LatencySeriesSerializer, **SOURCE_FAILURES},
    )
    def get(self, request: Request) -> Response:
        return self.answer(services.latency_series, request)
