"""The query and the answer of `GET /api/v1/releases/stats/` (releases/outcomes.py)."""

from rest_framework import serializers


class StatsQuerySerializer(serializers.Serializer):
    service = serializers.CharField(required=False, max_length=255)
    since = serializers.DateTimeField(
        required=False, help_text="Only releases created at or after it (ISO 8601)."
    )


class ServiceOutcomesSerializer(serializers.Serializer):
    service = serializers.CharField()
    promoted = serializers.IntegerField()
    rolled_back = serializers.IntegerField()
    aborted = serializers.IntegerField()
    failed = serializers.IntegerField()
    finished = serializers.IntegerField()
    change_failure_rate = serializers.FloatField(
        allow_null=True, help_text="Percent of the finished releases rolled back or failed."
    )
    median_seconds_to_promote = serializers.FloatField(
        allow_null=True, help_text="From the `started` event to the `promoted` one."
    )


class StatsSerializer(serializers.Serializer):
    services = ServiceOutcomesSerializer(many=True)
