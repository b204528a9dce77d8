import math
import time

from rest_framework import serializers

from metrics.serializers import (
    MAX_FUTURE_SECONDS,
    MAX_LATENCY_MS,
    GatewayReportSerializer,
    StrictSerializer,
)
from traffic.samples import TrafficSample

# As large as the Python gateway lets a request head be (dataplane/gateway/limits.py): a
# client's long header must not get a gateway's whole batch refused.
MAX_HEADERS = 100
MAX_TEXT = 8192


class TrafficSampleSerializer(StrictSerializer):
    ts = serializers.FloatField(help_text="Epoch seconds the request arrived.")
    service = serializers.CharField(max_length=255)
    method = serializers.CharField(max_length=32)
    path = serializers.CharField(max_length=MAX_TEXT, trim_whitespace=False)
    ip = serializers.IPAddressField(help_text="The client IP the gray decision used.")
    user = serializers.CharField(max_length=MAX_TEXT, allow_null=True, required=False, default=None)
    city = serializers.CharField(max_length=MAX_TEXT, allow_null=True, required=False, default=None)
    headers = serializers.DictField(
        child=serializers.CharField(max_length=MAX_TEXT, allow_blank=True),
        required=False,
        default=dict,
        help_text="Only the request headers some rule names, names lower-case.",
    )
    status = serializers.IntegerField(min_value=0, max_value=999)
    latency_ms = serializers.FloatField(min_value=0, max_value=MAX_LATENCY_MS)

    def validate_ts(self, value: float) -> float:
        if not math.isfinite(value):
            raise serializers.ValidationError("Must be a finite number.")
        if value > time.time() + MAX_FUTURE_SECONDS:
            raise serializers.ValidationError(
                f"More than {MAX_FUTURE_SECONDS} s in the future: check the gateway's clock."
            )
        return value

    def validate_latency_ms(self, value: float) -> float:
        if not math.isfinite(value):
            raise serializers.ValidationError("Must be a finite number.")
        return value

    def validate_headers(self, value: dict[str, str]) -> dict[str, str]:
        if len(value) > MAX_HEADERS:
            raise serializers.ValidationError(f"At most {MAX_HEADERS} headers.")
        upper = sorted(name for name in value if name != name.lower() or not name)
        if upper:
            raise serializers.ValidationError(f"Names must be lower-case and not empty: {upper}.")
        return value


class TrafficIngestSerializer(GatewayReportSerializer):
    samples = TrafficSampleSerializer(many=True, allow_empty=False)

    def to_samples(self) -> list[TrafficSample]:
        return [TrafficSample(**sample) for sample in self.validated_data["samples"]]


class TrafficAcceptedSerializer(serializers.Serializer):
    accepted = serializers.IntegerField(help_text="Samples kept.")
    dropped = serializers.IntegerField(
        help_text="Samples not kept: over TRAFFIC_SAMPLES_PER_SERVICE or TRAFFIC_SAMPLES_MAX, "
        "or already out of the window. All of them when TRAFFIC_SAMPLES is off."
    )
    refused = serializers.DictField(
        child=serializers.IntegerField(),
        help_text="Samples not taken, by service: services the gateway does not front.",
    )
    refused_reasons = serializers.DictField(
        child=serializers.CharField(), help_text="Why, for each service in `refused`."
    )
