import time
from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.utils.serializer_helpers import ReturnDict

from releases import states
from releases.bundle_order import order_warnings
from releases.models import Release, ReleaseBundle, ReleaseEvent
from routing_engine.lanes import GRAY_LANE
from routing_engine.policy import canonical_percent, percent_problem

MAX_STEPS = 20
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
    the users, sticky (the targeted rules keep applying)."""

    targeted = serializers.BooleanField(required=False)
    percent = PercentField(required=False)

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, dict):
            unknown = set(data) - {"targeted", "percent"}
            if unknown:
                raise serializers.ValidationError(
                    {key: ["Unknown field."] for key in sorted(unknown)}
                )
        return super().to_internal_value(data)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if attrs.get("targeted") is True and "percent" not in attrs:
            return {"targeted": True}
        if "percent" in attrs and "targeted" not in attrs:
            return {"percent": attrs["percent"]}
        raise serializers.ValidationError('Either {"targeted": true} or {"percent": 0.01..100}.')


class AnalysisSerializer(serializers.Serializer):
    interval_s = serializers.IntegerField(min_value=5, max_value=300, default=60)
    min_requests = serializers.IntegerField(min_value=1, default=100)
    # Above 0: the sequential test weighs "worse by twice this" against "equal".
    max_error_rate_increase = serializers.FloatField(
        min_value=0.01, max_value=100, default=1.0, help_text="Percentage points over prod."
    )
    failures_tolerated = serializers.IntegerField(min_value=0, max_value=100, default=1)
    max_p95_ms = serializers.FloatField(min_value=0, allow_null=True, default=None)
    deadline_s = serializers.IntegerField(min_value=5, default=3600)

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

    def validate_steps(self, steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if not steps or len(steps) > MAX_STEPS:
            raise serializers.ValidationError(f"From 1 to {MAX_STEPS} steps.")
        if any(step.get("targeted") for step in steps[1:]):
            raise serializers.ValidationError("Only the first step may be the targeted one.")
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
            "created_by",
            "created_at",
            "updated_at",
            "allowed_actions",
            "bundle",
            "depends_on",
        ]
        read_only_fields = fields

    def get_allowed_actions(self, release: Release) -> list[str]:
        return states.allowed_actions(release.state)


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
