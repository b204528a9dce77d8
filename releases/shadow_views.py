from collections import Counter

from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from gateways import fronting
from gateways.protocol.views import GatewayReportView, report_schema
from releases import shadow
from releases.shadow_serializers import ShadowAcceptedSerializer, ShadowIngestSerializer


class ShadowIngestView(GatewayReportView):
    @report_schema(
        "v1_shadow_comparisons_create",
        (
            "Shadow traffic's comparisons a gateway made since its last report: per service, "
            "prod version, mirror version and path, the copies compared with prod's answers. "
            "Kept for the active release of those versions; comparisons of services the "
            "gateway does not front are refused (`refused`, by service)."
        ),
        ShadowIngestSerializer,
        ShadowAcceptedSerializer,
        "comparison",
    )
    def post(self, request: Request) -> Response:
        gateway = self.reporter(request)
        form = ShadowIngestSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        comparisons = form.validated_data["comparisons"]
        reasons = fronting.refusals(gateway, {c["service"] for c in comparisons})
        refused = Counter(c["service"] for c in comparisons if c["service"] in reasons)
        kept, unattributed = shadow.ingest(c for c in comparisons if c["service"] not in reasons)
        answer = {"accepted": kept, "unattributed": unattributed, "refused": dict(refused)}
        return Response(answer, status=status.HTTP_202_ACCEPTED)
