"""Shapes of the impact preview (its OpenAPI description). The draft is validated as
publishing it would be (policy.proposals), not by these."""

from rest_framework import serializers

from policy.serializers import LaneSerializer, PolicySerializer


class PreviewRequestSerializer(serializers.Serializer):
    policy = PolicySerializer(required=False, help_text="The fields of PUT /api/v1/policy/.")
    lanes = LaneSerializer(
        many=True,
        required=False,
        help_text="Lanes as the lanes API takes them, each with its name: one of that name is "
        "replaced (`gray`: the policy's lane), any other is new.",
    )


class ServiceImpactSerializer(serializers.Serializer):
    requests = serializers.IntegerField(help_text="Sampled requests entering at the service.")
    now = serializers.DictField(
        child=serializers.FloatField(),
        help_text="Share of them by the version they get now (`*`: any version).",
    )
    draft = serializers.DictField(
        child=serializers.FloatField(), help_text="The same under the draft."
    )
    moved = serializers.FloatField(help_text="Share that would get another version.")
    users_moved = serializers.IntegerField(help_text="Distinct users among the moved.")


class RuleImpactSerializer(serializers.Serializer):
    lane = serializers.CharField()
    rule = serializers.ChoiceField(choices=["header", "ip", "city", "user", "percent"])
    value = serializers.JSONField(help_text="The entry: `name: value`, an IP or CIDR, a city, a "
                                  "user or the percent.")  # fmt: skip
    matched = serializers.IntegerField(
        help_text="Sampled requests it matches, whether or not an earlier rule decided them."
    )


class PreviewSerializer(serializers.Serializer):
    window_s = serializers.IntegerField()
    samples = serializers.IntegerField()
    services = serializers.DictField(child=ServiceImpactSerializer())
    rules = RuleImpactSerializer(many=True)
