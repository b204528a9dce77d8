"""`GET /api/v1/`: where a newcomer starts, links to the main collections and the schema."""

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.reverse import reverse
from rest_framework.views import APIView

# Link name → URL name, in the order docs/api.md presents them.
LINKS = {
    "policy": "policy",
    "lanes": "lanes",
    "services": "service-list",
    "releases": "release-list",
    "release-bundles": "release-bundle-list",
    "gateways": "gateway-list",
    "registries": "registry-list",
    "revisions": "revision-list",
    "audit": "audit-list",
    "freezes": "freeze-list",
    "webhooks": "webhook-list",
    "call-edges": "call-edges",
    "schema": "schema",
    "docs": "api-docs",
}


class ApiRootView(APIView):
    """Absolute links, as DRF's browsable root gives them; reading it needs `viewer`."""

    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    def get(self, request: Request) -> Response:
        return Response({name: reverse(url, request=request) for name, url in LINKS.items()})
