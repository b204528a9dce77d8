import math
import time
from typing import Any

from django.conf import settings
from rest_framework import serializers

from metrics.samples import Sample
from routing_engine.lanes import lane_name_problem

# A gateway's clock may run a little ahead of ours; more than this is a wrong clock.
MAX_FUTURE_SECONDS = 60
MAX_LATENCY_MS = 3_600_000.0


class StrictSerializer(serializers.Serializer):
    """Refuses fields it does not know, naming them: a misspelt `erors` must not pass as a
    sample without errors."""

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, dict):
            unknown = sorted(set(data) - set(self.fields))
            if unknown:
                raise serializers.ValidationError({name: ["Unknown field."] for name in unknown})
        return super().to_internal_value(data)


# Instances one sample may name: a gateway spreads a series' requests over at most this many.
MAX_SAMPLE_INSTANCES = 200


class InstanceShareSerializer(StrictSerializer):
    address = serializers.CharField(
        max_length=300, help_text="The instance that answered: host:port."
    )
    total = serializers.IntegerField(min_value=0, max_value=10**9)
    errors = serializers.IntegerField(min_value=0)  # type: ignore[assignment]

    def validate_address(self, value: str) -> str:
        host, colon, port = value.rpartition(":")
        if not (host and colon and port.isdigit() and 0 < int(port) < 65536):
            raise serializers.ValidationError("Expected host:port.")
        if any(ord(c) < 33 or ord(c) == 127 for c in value):
            raise serializers.ValidationError("No spaces or control characters.")
        return value

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if attrs["errors"] > attrs["total"]:
            raise serializers.ValidationError({"errors": ["More errors than requests (total)."]})
        return attrs


class SampleSerializer(StrictSerializer):
    service = serializers.CharField(max_length=255)
    version = serializers.CharField(max_length=100)
    ts = serializers.IntegerField(help_text="Epoch seconds: the start of the sample's window.")
    window_s = serializers.IntegerField(min_value=1, max_value=60, default=1)
    total = serializers.IntegerField(min_value=0, max_value=10**9)
    # DRF's metaclass takes declared fields off the class: Serializer.errors stays as it is.
    errors = serializers.IntegerField(  # type: ignore[assignment]
        min_value=0, help_text="5xx answers and failed proxy attempts, at most `total`."
    )
    latency_ms_p95 = serializers.FloatField(
        min_value=0, max_value=MAX_LATENCY_MS, allow_null=True, required=False, default=None
    )
    lane = serializers.CharField(
        allow_null=True,
        required=False,
        default=None,
        trim_whitespace=False,
        help_text="The lane of the GRAY requests counted (`gray` for the gray lane); absent "
        "or null for PROD and ALL requests. One sample per (service, version, lane) and ts. "
        "A lane the live document does not have (deleted since) is counted without it.",
    )

    instances = InstanceShareSerializer(
        many=True,
        required=False,
        default=list,
        help_text="The sample's requests and errors by the instance that answered them, for "
        "the service page's per-instance traffic; optional (requests no instance answered "
        "are in no entry).",
    )

    def validate_ts(self, value: int) -> int:
        now = time.time()
        if value > now + MAX_FUTURE_SECONDS:
            raise serializers.ValidationError(
                f"More than {MAX_FUTURE_SECONDS} s in the future: check the gateway's clock."
            )
        if value < now - settings.METRICS_MAX_AGE_SECONDS:
            raise serializers.ValidationError(
                f"Older than {settings.METRICS_MAX_AGE_SECONDS} s: too late to be counted."
            )
        return value

    def validate_instances(self, value: list[dict]) -> list[dict]:
        if len(value) > MAX_SAMPLE_INSTANCES:
            raise serializers.ValidationError(f"At most {MAX_SAMPLE_INSTANCES} instances.")
        return value

    def validate_latency_ms_p95(self, value: float | None) -> float | None:
        if value is not None and not math.isfinite(value):
            raise serializers.ValidationError("Must be a finite number.")
        return value

    def validate_lane(self, value: str | None) -> str | None:
        problem = None if value is None else lane_name_problem(value)
        if problem:
            raise serializers.ValidationError(problem)
        return value

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if attrs["errors"] > attrs["total"]:
            raise serializers.ValidationError({"errors": ["More errors than requests (total)."]})
        shares = attrs["instances"]
        if len({share["address"] for share in shares}) < len(shares):
            raise serializers.ValidationError({"instances": ["An address twice."]})
        if sum(share["total"] for share in shares) > attrs["total"]:
            raise serializers.ValidationError(
                {"instances": ["More requests than the sample's total."]}
            )
        if sum(share["errors"] for share in shares) > attrs["errors"]:
            raise serializers.ValidationError({"instances": ["More errors than the sample's."]})
        return attrs


class GatewayReportSerializer(StrictSerializer):
    """What a gateway reports: its name (its token's) and a bounded list of `samples`, whose
    serializer the subclass names."""

    gateway = serializers.SlugField(max_length=64, help_text="The gateway sending (its token's).")

    def validate_gateway(self, value: str) -> str:
        if value != self.context["gateway"]:
            raise serializers.ValidationError("Not the gateway this token belongs to.")
        return value

    def validate_samples(self, value: list[dict]) -> list[dict]:
        if len(value) > settings.METRICS_MAX_SAMPLES:
            raise serializers.ValidationError(
                f"At most {settings.METRICS_MAX_SAMPLES} samples per request."
            )
        return value


class IngestSerializer(GatewayReportSerializer):
    samples = SampleSerializer(many=True, allow_empty=False)

    def validate_samples(self, value: list[dict]) -> list[dict]:
        value = super().validate_samples(value)
        seen = set()
        for sample in value:
            key = (sample["service"], sample["version"], sample["lane"], sample["ts"])
            if key in seen:
                lane = "no lane" if key[2] is None else f"lane {key[2]!r}"
                raise serializers.ValidationError(
                    f"Two samples for service {key[0]!r}, version {key[1]!r}, {lane}, ts {key[3]}."
                )
            seen.add(key)
        return value

    def to_samples(self) -> list[Sample]:
        return [
            Sample(
                service=s["service"],
                version=s["version"],
                ts=s["ts"],
                total=s["total"],
                errors=s["errors"],
                latency_ms_p95=s["latency_ms_p95"],
                lane=s["lane"],
                instances=tuple(
                    (share["address"], share["total"], share["errors"]) for share in s["instances"]
                ),
            )
            for s in self.validated_data["samples"]
        ]


class AcceptedSerializer(serializers.Serializer):
    accepted = serializers.IntegerField(help_text="Samples counted now.")
    duplicates = serializers.IntegerField(help_text="Samples counted before (re-sent): ignored.")
    refused = serializers.DictField(
        child=serializers.IntegerField(),
        help_text="Samples not taken, by service: services the gateway does not front, or "
        "series beyond METRICS_MAX_SERIES. Empty when all were taken.",
    )
    refused_reasons = serializers.DictField(
        child=serializers.CharField(), help_text="Why, for each service in `refused`."
    )


class SeriesQuerySerializer(serializers.Serializer):
    service = serializers.CharField(max_length=255)
    since = serializers.IntegerField(
        min_value=0, required=False, help_text="Epoch seconds; default: an hour ago."
    )
    step = serializers.IntegerField(
        min_value=60,
        max_value=86400,
        default=60,
        help_text="Seconds per point, a multiple of 60 (the rollups are per minute).",
    )

    # DRF's metaclass takes declared fields off the class: Field.source stays as it is.
    source = serializers.ChoiceField(  # type: ignore[assignment]
        choices=["rollups", "prometheus"],
        required=False,
        help_text="Where the series come from: the per-minute rollups of what gateways "
        "posted, or Prometheus (PROMETHEUS_URL) through the PromQL templates; default: "
        "METRICS_SOURCE.",
    )

    MAX_POINTS = 10_000

    def validate_step(self, value: int) -> int:
        if value % 60:
            raise serializers.ValidationError("Must be a multiple of 60.")
        return value

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        now = int(time.time())
        since = attrs.get("since", now - 3600)
        if since > now:
            raise serializers.ValidationError({"since": ["In the future."]})
        if (now - since) // attrs["step"] > self.MAX_POINTS:
            raise serializers.ValidationError(
                {"step": [f"More than {self.MAX_POINTS} points: raise step or since."]}
            )
        attrs["since"] = since
        attrs["source"] = attrs.get("source", settings.METRICS_SOURCE)
        if attrs["source"] == "prometheus" and not settings.PROMETHEUS_URL:
            raise serializers.ValidationError(
                {"source": ["No Prometheus is configured (PROMETHEUS_URL)."]}
            )
        return attrs


class SuccessRateSeriesSerializer(serializers.Serializer):
    service = serializers.CharField()
    series = serializers.DictField(
        child=serializers.ListField(child=serializers.ListField(child=serializers.FloatField())),
        help_text="By version: [ts, success rate in percent, total requests] per step with "
        "traffic, oldest first.",
    )


class LatencySeriesSerializer(serializers.Serializer):
    service = serializers.CharField()
    series = serializers.DictField(
        child=serializers.ListField(child=serializers.ListField(child=serializers.FloatField())),
        help_text="By version: [ts, p95 latency in ms, total requests] per step with traffic "
        "and reported latency, oldest first.",
    )
