from django.conf import settings
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from gateways.authentication import GatewayOnlyTokenAuthentication
from gateways.models import Gateway
from gateways.protocol.views import GATEWAY_TOKEN, REFUSALS, GatewayEndpoint
from metrics.permissions import GatewayOnly
from traffic import ingest
from traffic.serializers import TrafficAcceptedSerializer, TrafficIngestSerializer


class TrafficSamplesView(GatewayEndpoint):
    authentication_classes = [GatewayOnlyTokenAuthentication]
    permission_classes = [GatewayOnly]

    def max_body_bytes(self) -> int:
        return settings.METRICS_MAX_BODY_BYTES

    @extend_schema(
        operation_id="v1_traffic_samples_create",
        description=(
            "Requests a gateway sampled (personal data: kept TRAFFIC_SAMPLES_WINDOW_S at "
            "most, never in the database). Any invalid sample refuses the whole request, and "
            "nothing is kept. Samples of services the gateway does not front are refused and "
            "the rest taken: `refused` counts them by service, `refused_reasons` says why. "
            "Samples over the caps, or all of them with TRAFFIC_SAMPLES off, are `dropped`."
        ),
        request=TrafficIngestSerializer,
        auth=GATEWAY_TOKEN,
        responses={
            202: TrafficAcceptedSerializer,
            400: OpenApiResponse(description="Field messages, by sample index."),
            413: OpenApiResponse(description="A body over METRICS_MAX_BODY_BYTES."),
            **REFUSALS,
        },
    )
    def post(self, request: Request) -> Response:
        gateway = request.auth
        assert isinstance(gateway, Gateway), "GatewayOnlyTokenAuthentication lets gateways in only"
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
