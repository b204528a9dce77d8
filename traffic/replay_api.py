from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import permissions, serializers
from rest_framework.exceptions import PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.bindings import is_service_user, may_replay
from policy.publishing import load_state
from traffic.replay import as_replay, replayable

DEFAULT_LIMIT = 100
MAX_LIMIT = 1000


class ServiceUserOnly(permissions.BasePermission):
    def has_permission(self, request: Request, view: APIView) -> bool:
        return is_service_user(request.user)


class ReplayQuerySerializer(serializers.Serializer):
    service = serializers.CharField(max_length=255)
    limit = serializers.IntegerField(min_value=1, max_value=MAX_LIMIT, default=DEFAULT_LIMIT)


class ReplaySampleSerializer(serializers.Serializer):
    ts = serializers.FloatField()
    method = serializers.CharField()
    path = serializers.CharField()
    headers = serializers.DictField(child=serializers.CharField())
    user = serializers.CharField(allow_null=True)


class ReplaySerializer(serializers.Serializer):
    service = serializers.CharField()
    user_header = serializers.CharField()
    samples = ReplaySampleSerializer(many=True)


class ReplayView(APIView):
    permission_classes = [ServiceUserOnly]

    @extend_schema(
        operation_id="v1_traffic_samples_replay",
        description="Recent sampled idempotent requests of a service, newest first, for its "
        "instances' warm-up: a service token whose user is bound to the service. Holds "
        "personal data (users, headers).",
        parameters=[ReplayQuerySerializer],
        responses={
            200: ReplaySerializer,
            400: OpenApiResponse(description="Field messages."),
            403: OpenApiResponse(description="Not a service user bound to that service."),
        },
    )
    def get(self, request: Request) -> Response:
        query = ReplayQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        service, limit = query.validated_data["service"], query.validated_data["limit"]
        if not may_replay(request.user, service):
            raise PermissionDenied(f"This token's user is not bound to {service!r}.")
        return Response(
            {
                "service": service,
                # Each sample's `user` is sent in this header, as the gateway read it.
                "user_header": load_state().document["gray"]["user_header"],
                "samples": [as_replay(sample) for sample in replayable(service, limit)],
            }
        )
