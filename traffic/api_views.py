from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from gateways.protocol.views import GatewayReportView, report_schema
from traffic import ingest
from traffic.serializers import TrafficAcceptedSerializer, TrafficIngestSerializer


class TrafficSamplesView(GatewayReportView):
    @report_schema(
        "v1_traffic_samples_create",
        (
            "Requests a gateway sampled (personal data: kept TRAFFIC_SAMPLES_WINDOW_S at "
            "most, never in the database). Any invalid sample refuses the whole request, and "
            "nothing is kept. Samples of services the gateway does not front are refused and "
            "the rest taken: `refused` counts them by service, `refused_reasons` says why. "
            "Samples over the caps, or all of them with TRAFFIC_SAMPLES off, are `dropped`."
        ),
        TrafficIngestSerializer,
        TrafficAcceptedSerializer,
        "sample",
    )
    def post(self, request: Request) -> Response:
        gateway = self.reporter(request)
        serializer = TrafficIngestSerializer(data=request.data, context={"gateway": gateway.name})
        serializer.is_valid(raise_exception=True)
        taken = ingest.take(gateway, serializer.to_samples())
        answer = {
            "accepted": taken.accepted,
            "dropped": taken.dropped,
            "refused": taken.refused,
            "refused_reasons": {name: taken.reasons[name] for name in taken.refused},
        }
        return Response(answer, status=status.HTTP_202_ACCEPTED)
