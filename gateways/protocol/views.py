"""The gateway endpoints in Django's URL conf: the same answers as the ASGI path (both call
protocol/endpoints.py), for whatever reaches Django (the test client, a WSGI server), and
the source of their OpenAPI description."""

from collections.abc import Callable
from typing import Any, TypeVar

from asgiref.sync import async_to_sync
from django.conf import settings
from django.http import HttpResponse
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import permissions
from rest_framework.request import Request
from rest_framework.views import APIView

from gateways.authentication import GatewayOnlyTokenAuthentication, GatewayPrincipal
from gateways.models import Gateway
from gateways.protocol import endpoints
from gateways.protocol.serializers import (
    AckRecordedSerializer,
    AckSerializer,
    DetailSerializer,
    GatewayDocumentSerializer,
    PollQuerySerializer,
)

REFUSALS = {
    401: OpenApiResponse(DetailSerializer, description="No token, or not a valid one."),
    403: OpenApiResponse(
        DetailSerializer, description="A user's token, or (ack) another gateway's name."
    ),
}
F = TypeVar("F", bound=Callable[..., Any])

# Gateways send `Authorization: Token <key>`; the endpoints check it themselves.
# (drf-spectacular takes security requirement objects here, whatever its hint says.)
GATEWAY_TOKEN: Any = [{"tokenAuth": []}]


def _response(answer: endpoints.Answer) -> HttpResponse:
    response = HttpResponse(answer.body, status=answer.status)
    if "Content-Type" not in answer.headers:
        del response["Content-Type"]
    for name, value in answer.headers.items():
        if name != "Connection":  # hop-by-hop: the server's business under WSGI
            response[name] = value
    return response


class GatewayEndpoint(APIView):
    """An endpoint for gateway tokens only (other apps' too, e.g. metrics ingestion)."""

    # The endpoints authenticate the gateway themselves (no session, so no CSRF either).
    authentication_classes: list = []
    permission_classes: list = []

    def max_body_bytes(self) -> int:
        return settings.GATEWAY_MAX_BODY_BYTES

    def dispatch(self, request, *args, **kwargs):
        # As on the ASGI path: a body over the limit is refused before it is read or the
        # caller authenticated. (Django reads no more than Content-Length.)
        refusal = endpoints.content_length_refusal(
            request.META.get("CONTENT_LENGTH") or None, self.max_body_bytes()
        )
        if refusal is not None:
            return _response(refusal)
        return super().dispatch(request, *args, **kwargs)


class GatewayOnly(permissions.BasePermission):
    """Gateway tokens only: a user's token (whatever its role) is refused with 403."""

    def has_permission(self, request: Request, view: APIView) -> bool:
        return isinstance(request.user, GatewayPrincipal)


class GatewayReportView(GatewayEndpoint):
    """Where a gateway posts what it saw (metrics, traffic samples, shadow comparisons, each
    in its own app): its own token only, a body up to METRICS_MAX_BODY_BYTES, answered 202."""

    authentication_classes = [GatewayOnlyTokenAuthentication]
    permission_classes = [GatewayOnly]

    def max_body_bytes(self) -> int:
        return settings.METRICS_MAX_BODY_BYTES

    @staticmethod
    def reporter(request: Request) -> Gateway:
        gateway = request.auth
        assert isinstance(gateway, Gateway), "GatewayOnlyTokenAuthentication lets gateways in only"
        return gateway


def report_schema(
    operation_id: str, description: str, request: Any, accepted: Any, item: str
) -> Callable[[F], F]:
    """The OpenAPI description of a GatewayReportView's post; `item`: what the body lists."""
    return extend_schema(
        operation_id=operation_id,
        description=description,
        request=request,
        auth=GATEWAY_TOKEN,
        responses={
            202: accepted,
            400: OpenApiResponse(description=f"Field messages, by {item} index."),
            413: OpenApiResponse(description="A body over METRICS_MAX_BODY_BYTES."),
            **REFUSALS,
        },
    )


class GatewayConfigView(GatewayEndpoint):
    @extend_schema(
        operation_id="v1_gateway_config_retrieve",
        description=(
            "The gateway document, for a gateway's own token. A long poll: with `known`, "
            "answered as soon as a newer generation exists, or 304 after `wait` seconds. "
            "With `applied`, also the gateway's ack of that generation."
        ),
        parameters=[
            PollQuerySerializer,
            OpenApiParameter(
                endpoints.NAME_HEADER,
                str,
                OpenApiParameter.HEADER,
                response=[200, 304],
                description="The name of the gateway whose token polled (for its acks).",
            ),
        ],
        auth=GATEWAY_TOKEN,
        responses={
            200: GatewayDocumentSerializer,
            304: OpenApiResponse(description="No newer generation within `wait` seconds."),
            400: OpenApiResponse(description="A bad `known`, `wait` or `applied`."),
            **REFUSALS,
        },
    )
    def get(self, request: Request) -> HttpResponse:
        authorization = request.headers.get("Authorization", "")
        return _response(async_to_sync(endpoints.poll)("GET", authorization, request.GET))


class GatewayAckView(GatewayEndpoint):
    @extend_schema(
        operation_id="v1_gateways_ack_create",
        description=(
            "The gateway runs this generation (acks never go backwards); with `error`, it "
            "refused this generation and keeps running the one it ran."
        ),
        request=AckSerializer,
        auth=GATEWAY_TOKEN,
        responses={
            200: AckRecordedSerializer,
            400: OpenApiResponse(
                description="Not a generation, one that does not exist yet, or a bad `error`."
            ),
            **REFUSALS,
        },
    )
    def post(self, request: Request, name: str) -> HttpResponse:
        authorization = request.headers.get("Authorization", "")
        return _response(async_to_sync(endpoints.ack)("POST", authorization, name, request.body))
