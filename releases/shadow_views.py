from collections import Counter

from django.conf import settings
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from gateways import fronting
from gateways.authentication import GatewayOnlyTokenAuthentication
from gateways.models import Gateway
from gateways.protocol.views import GATEWAY_TOKEN, REFUSALS, GatewayEndpoint
from metrics.permissions import GatewayOnly
from releases import shadow
from releases.shadow_serializers import ShadowAcceptedSerializer, ShadowIngestSerializer


class ShadowIngestView(GatewayEndpoint):
    authentication_classes = [GatewayOnlyTokenAuthentication]
    permission_classes = [GatewayOnly]

    def max_body_bytes(self) -> int:
        return settings.METRICS_MAX_BODY_BYTES

    @extend_schema(
        operation_id="v1_shadow_comparisons_create",
        description=(
            "Shadow traffic's comparisons a gateway made since its last report: per service, "
            "prod version, mirror version and path, the copies compared with prod's answers. "
            "Kept for the active release of those versions; comparisons of services the "
            "gateway does not front are refused (`refused`, by service)."
        ),
        request=ShadowIngestSerializer,
        auth=GATEWAY_TOKEN,
        responses={
            202: ShadowAcceptedSerializer,
            400: OpenApiResponse(description="Field messages, by comparison index."),
            413: OpenApiResponse(description="A body over METRICS_MAX_BODY_BYTES."),
            **REFUSALS,
        },
    )
    def post(self, request: Request) -> Response:
        gateway = request.auth
        assert isinstance(gateway, Gateway), "GatewayOnlyTokenAuthentication lets gateways in only"
        form = ShadowIngestSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        comparisons = form.validated_data["comparisons"]
        reasons = fronting.refusals(gateway, {c["service"] for c in comparisons})
        refused = Counter(c["service"] for c in comparisons if c["service"] in reasons)
        kept, unattributed = shadow.ingest(c for c in comparisons if c["service"] not in reasons)
        answer = {"accepted": kept, "unattributed": unattributed, "refused": dict(refused)}
        return Response(answer, status=status.HTTP_202_ACCEPTED)
