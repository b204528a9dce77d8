import math
import time
from itertools import pairwise
from typing import Any

from django.conf import settings
from django.utils import timezone
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.utils.serializer_helpers import ReturnDict

from releases import analysis, promql_checks, states
from releases.bundle_order import order_warnings
from releases.metric_checks import ABOVE, BELOW, BUILT_IN
from releases.models import Release, ReleaseBundle, ReleaseEvent
from routing_engine.lanes import GRAY_LANE
from routing_engine.policy import PolicyError, canonical_percent, check_mirror, percent_problem

MAX_STEPS = 20
MAX_METRICS = 10
MAX_DEPENDS_ON = 50


@extend_schema_field({"type": "number", "minimum": 0.01, "maximum": 100, "multipleOf": 0.01})
class PercentField(serializers.Field):
    """A step's share of users: a JSON number above 0 and up to 100 with at most two decimals
    (the engine's rule for every percent, routing_engine.policy), whole values as integers."""

    def to_internal_value(self, data: Any) -> int | float:
        problem = percent_problem(data)
        if problem:
            raise serializers.ValidationError(problem)
        if data == 0:
            raise serializers.ValidationError("Must be above 0 (the first step may be targeted).")
        return canonical_percent(data)

    def to_representation(self, value: Any) -> Any:
        return value


class StepSerializer(serializers.Serializer):
    """`{"targeted": true}`: the lane's targeted rules only; `{"percent": N}`: also N % of
    the users, sticky (the targeted rules keep applying); `{"approval": true}`: wait for an
    operator's approval, the routing as at the step before (releases/approvals.py)."""

    targeted = serializers.BooleanField(required=False)
    percent = PercentField(required=False)
    approval = serializers.BooleanField(required=False)

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, dict):
            unknown = set(data) - {"targeted", "percent", "approval"}
            if unknown:
                raise serializers.ValidationError(
                    {key: ["Unknown field."] for key in sorted(unknown)}
                )
        return super().to_internal_value(data)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if attrs == {"targeted": True}:
            return {"targeted": True}
        if attrs == {"approval": True}:
            return {"approval": True}
        if set(attrs) == {"percent"}:
            return {"percent": attrs["percent"]}
        raise serializers.ValidationError(
            'Either {"targeted": true}, {"percent": 0.01..100} or {"approval": true}.'
        )


@extend_schema_field({"type": "number"})
class NumberField(serializers.Field):
    """A JSON number, not a string that reads as one."""

    def to_internal_value(self, data: Any) -> float:
        if isinstance(data, bool) or not isinstance(data, int | float) or not math.isfinite(data):
            raise serializers.ValidationError("A number is required.")
        return float(data)

    def to_representation(self, value: Any) -> Any:
        return value


class MetricSerializer(serializers.Serializer):
    """A custom metric: a PromQL template evaluated for the gray version, failing an
    interval when its value is past `bound` on the `fail_when` side."""

    name = serializers.CharField(max_length=63)
    query = serializers.CharField(max_length=2000)
    bound = NumberField()
    fail_when = serializers.ChoiceField(choices=[ABOVE, BELOW])

    def validate_name(self, name: str) -> str:
        if name in BUILT_IN:
            raise serializers.ValidationError(f"{name!r} is the analysis' own; pick another.")
        return name

    def validate_query(self, query: str) -> str:
        wrong = promql_checks.unknown_placeholders(query)
        if wrong:
            raise serializers.ValidationError(
                f"Unknown placeholder {', '.join('{' + w + '}' for w in wrong)} (known: "
                + ", ".join("{" + p + "}" for p in promql_checks.PLACEHOLDERS)
                + ")."
            )
        return query


class AnalysisSerializer(serializers.Serializer):
    interval_s = serializers.IntegerField(
        min_value=5, max_value=analysis.MAX_INTERVAL_S, default=60
    )
    min_requests = serializers.IntegerField(min_value=1, default=100)
    # Above 0: the sequential test weighs "worse by twice this" against "equal".
    max_error_rate_increase = serializers.FloatField(
        min_value=0.01, max_value=100, default=1.0, help_text="Percentage points over prod."
    )
    failures_tolerated = serializers.IntegerField(min_value=0, max_value=100, default=1)
    max_p95_ms = serializers.FloatField(min_value=0, allow_null=True, default=None)
    deadline_s = serializers.IntegerField(min_value=5, default=3600)
    max_p95_increase_ms = serializers.FloatField(
        min_value=0, allow_null=True, default=None, help_text="Gray p95 over prod's, ms."
    )
    metrics = MetricSerializer(many=True, default=list)

    def validate_metrics(self, metrics: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if len(metrics) > MAX_METRICS:
            raise serializers.ValidationError(f"At most {MAX_METRICS} metrics.")
        names = [metric["name"] for metric in metrics]
        twice = sorted({name for name in names if names.count(name) > 1})
        if twice:
            raise serializers.ValidationError(f"Names must differ: {', '.join(twice)} repeated.")
        if metrics and not settings.PROMETHEUS_URL:
            raise serializers.ValidationError(
                "Custom metrics are read through Prometheus: PROMETHEUS_URL is not set."
            )
        return [dict(metric) for metric in metrics]

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if attrs["deadline_s"] < attrs["interval_s"]:
            raise serializers.ValidationError(
                {"deadline_s": ["Must be at least interval_s (one interval per step)."]}
            )
        return attrs


@extend_schema_field({"type": "array", "items": {"type": "object"}})
class StepsField(serializers.ListField):
    pass


class ReleaseCreateSerializer(serializers.Serializer):
    service = serializers.CharField(max_length=255)
    from_version = serializers.CharField(
        max_length=64, required=False, allow_null=True, default=None
    )
    to_version = serializers.CharField(max_length=64)
    lane = serializers.CharField(
        max_length=63, default=GRAY_LANE, help_text="An existing lane; `gray` is the policy."
    )
    steps = StepSerializer(many=True)
    analysis = AnalysisSerializer(default=dict)
    mirror = serializers.JSONField(
        required=False, allow_null=True, default=None, help_text='`{"percent": p}`, 0 < p <= 100.'
    )

    def validate_mirror(self, value: Any) -> dict[str, Any] | None:
        if value is None:
            return None
        try:
            return check_mirror(value, "")
        except PolicyError as exc:
            raise serializers.ValidationError(
                {field.lstrip(".") or "non_field_errors": m for field, m in exc.errors.items()}
            ) from None

    def validate_steps(self, steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if not steps or len(steps) > MAX_STEPS:
            raise serializers.ValidationError(f"From 1 to {MAX_STEPS} steps.")
        traffic = [step for step in steps if not step.get("approval")]
        if not traffic:
            raise serializers.ValidationError("At least one step of traffic.")
        if any(step.get("targeted") for step in traffic[1:]):
            raise serializers.ValidationError("Only the first step may be the targeted one.")
        if any(a.get("approval") and b.get("approval") for a, b in pairwise(steps)):
            raise serializers.ValidationError("Two approval steps in a row: one is enough.")
        percents = [step["percent"] for step in steps if "percent" in step]
        if percents != sorted(set(percents)):
            raise serializers.ValidationError("Percentages must grow from step to step.")
        return steps

    def validate_analysis(self, value: dict[str, Any]) -> dict[str, Any]:
        if not value:  # the default: every setting at its default
            form = AnalysisSerializer(data={})
            form.is_valid(raise_exception=True)
            return dict(form.validated_data)
        return dict(value)

    def release_fields(self) -> dict:
        """The validated release as services.create_release() takes it (API and page)."""
        data = self.validated_data
        return {
            "service": data["service"],
            "to_version": data["to_version"],
            "from_version": data.get("from_version"),
            "lane": data["lane"],
            "steps": data["steps"],
            "analysis_settings": data["analysis"],
            "mirror": data["mirror"],
        }


class ReleaseSerializer(serializers.ModelSerializer):
    steps = serializers.JSONField()
    analysis = serializers.JSONField()
    allowed_actions = serializers.SerializerMethodField()

    class Meta:
        model = Release
        fields = [
            "id",
            "service",
            "from_version",
            "to_version",
            "lane",
            "state",
            "step",
            "steps",
            "analysis",
            "mirror",
            "created_by",
            "created_at",
            "updated_at",
            "allowed_actions",
            "bundle",
            "scheduled_at",
            "depends_on",
        ]
        read_only_fields = fields

    def get_allowed_actions(self, release: Release) -> list[str]:
        return states.allowed_actions(release.state)


class ReleaseStartSerializer(serializers.Serializer):
    """`start/`'s body, optional: without `at` the release starts now."""

    at = serializers.DateTimeField(
        required=False, allow_null=True, help_text="Start then instead (state `scheduled`)."
    )

    def validate_at(self, value: Any) -> Any:
        if value is not None and value <= timezone.now():
            raise serializers.ValidationError("Must be in the future (leave it out to start now).")
        return value


class ReleaseEventSerializer(serializers.ModelSerializer):
    class Meta:
        model = ReleaseEvent
        fields = ["at", "kind", "step", "detail"]
        read_only_fields = fields


class BundleMemberSerializer(serializers.Serializer):
    service = serializers.CharField(max_length=255)
    to_version = serializers.CharField(max_length=64)
    from_version = serializers.CharField(
        max_length=64, required=False, allow_null=True, default=None
    )
    depends_on = serializers.ListField(
        child=serializers.CharField(max_length=255),
        required=False,
        default=list,
        max_length=MAX_DEPENDS_ON,
        help_text="The services of this bundle it calls: released before it.",
    )


class BundleCreateSerializer(serializers.Serializer):
    """`releases` in dependency order (a service before those that call it): the one their
    `depends_on` give, else the listed one."""

    name = serializers.CharField(max_length=100)
    releases = BundleMemberSerializer(many=True)
    steps = StepSerializer(many=True)
    analysis = AnalysisSerializer(default=dict)

    validate_steps = ReleaseCreateSerializer.validate_steps
    validate_analysis = ReleaseCreateSerializer.validate_analysis

    def bundle_fields(self) -> dict:
        """The validated bundle as bundles.create_bundle() takes it (API and page)."""
        data = self.validated_data
        return {
            "name": data["name"],
            "members": [dict(member) for member in data["releases"]],
            "steps": data["steps"],
            "analysis_settings": data["analysis"],
        }


class BundleSerializer(serializers.ModelSerializer):
    state = serializers.SerializerMethodField()
    releases = serializers.SerializerMethodField()
    order_warnings = serializers.SerializerMethodField(
        help_text="Observed calls between its services that go against its order."
    )

    class Meta:
        model = ReleaseBundle
        fields = ["id", "name", "state", "created_by", "created_at", "releases", "order_warnings"]
        read_only_fields = fields

    def get_order_warnings(self, bundle: ReleaseBundle) -> list[str]:
        return order_warnings(bundle.members(), time.time())

    def get_state(self, bundle: ReleaseBundle) -> str:
        return bundle.state()

    @extend_schema_field(ReleaseSerializer(many=True))
    def get_releases(self, bundle: ReleaseBundle) -> list[ReturnDict]:
        return [ReleaseSerializer(member).data for member in bundle.members()]
