import time
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from call_graph.models import CallEdge
from metrics.serializers import MAX_FUTURE_SECONDS, StrictSerializer
from registry_sync.adapters.validation import service_name_problem
from routing_engine.lanes import lane_name_problem

MAX_SAMPLES = 1000


class ServiceNameField(serializers.CharField):
    def __init__(self, **kwargs: Any):
        super().__init__(max_length=255, **kwargs)

    def to_internal_value(self, data: Any) -> str:
        value = super().to_internal_value(data)
        if problem := service_name_problem(value):
            raise serializers.ValidationError(problem)
        return value


class CallEdgeSampleSerializer(StrictSerializer):
    """Calls `caller` at `caller_version` made to `callee` at `callee_version` (the version of
    the instance that answered) in the window starting at `ts`."""

    caller = ServiceNameField()
    caller_version = serializers.CharField(max_length=64)
    callee = ServiceNameField()
    callee_version = serializers.CharField(max_length=64)
    lane = serializers.CharField(
        allow_null=True,
        required=False,
        default=None,
        trim_whitespace=False,
        help_text="The lane of the GRAY requests the calls were made for (`gray` for the "
        "gray lane); null for PROD and ALL requests.",
    )
    ts = serializers.IntegerField(help_text="Epoch seconds; counted in its minute.")
    total = serializers.IntegerField(min_value=0, max_value=10**9)
    # DRF's metaclass takes declared fields off the class: Serializer.errors stays as it is.
    errors = serializers.IntegerField(  # type: ignore[assignment]
        min_value=0, help_text="Calls answered 5xx or not answered, at most `total`."
    )

    def validate_lane(self, value: str | None) -> str | None:
        problem = None if value is None else lane_name_problem(value)
        if problem:
            raise serializers.ValidationError(problem)
        return value

    def validate_ts(self, value: int) -> int:
        now = time.time()
        if value > now + MAX_FUTURE_SECONDS:
            raise serializers.ValidationError(
                f"More than {MAX_FUTURE_SECONDS} s in the future: check the service's clock."
            )
        if value < now - settings.CALL_EDGES_RETENTION_DAYS * 86400:
            raise serializers.ValidationError("Older than CALL_EDGES_RETENTION_DAYS.")
        return value

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if attrs["errors"] > attrs["total"]:
            raise serializers.ValidationError({"errors": ["More errors than calls (total)."]})
        return attrs


class CallEdgeReportSerializer(StrictSerializer):
    samples = CallEdgeSampleSerializer(many=True, allow_empty=False)

    def validate_samples(self, value: list[dict]) -> list[dict]:
        if len(value) > MAX_SAMPLES:
            raise serializers.ValidationError(f"At most {MAX_SAMPLES} samples per request.")
        return value


class CallEdgeSerializer(serializers.ModelSerializer):
    """One edge's calls in one minute (`ts`: its start, epoch seconds)."""

    ts = serializers.IntegerField(source="minute")
    lane = serializers.SerializerMethodField()

    class Meta:
        model = CallEdge
        fields = ["caller", "caller_version", "callee", "callee_version", "lane", "ts",
                  "total", "errors"]  # fmt: skip
        read_only_fields = fields

    def get_lane(self, edge: CallEdge) -> str | None:
        return edge.lane or None


@extend_schema_field({"type": "string", "description": "Epoch seconds or ISO 8601 time."})
class EpochOrTimeField(serializers.Field):
    """Epoch seconds, or an ISO 8601 time; as epoch seconds."""

    def to_internal_value(self, data: Any) -> int:
        try:
            return int(float(data))
        except (TypeError, ValueError, OverflowError):
            pass
        moment = serializers.DateTimeField(default_timezone=UTC).to_internal_value(data)
        return int(moment.timestamp())

    def to_representation(self, value: Any) -> str:
        return datetime.fromtimestamp(value, UTC).isoformat()


class CallEdgeQuerySerializer(serializers.Serializer):
    since = EpochOrTimeField(
        required=False, help_text="Epoch seconds or ISO 8601: minutes from then on."
    )
    service = serializers.CharField(
        max_length=255, required=False, help_text="Calls made or taken by this service."
    )
