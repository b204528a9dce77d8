from rest_framework import serializers

from releases.shadow import STATUS_CLASSES

# Per report: a gateway sends one comparison per (service, versions, path), at most 100 paths
# per service and version (dataplane/gateway/shadow.py).
MAX_COMPARISONS = 2000
MAX_PAIRS_SENT = 100


class ClassCountsSerializer(serializers.Serializer):
    total = serializers.IntegerField(min_value=0)
    mismatched = serializers.IntegerField(min_value=0)


class ExampleSerializer(serializers.Serializer):
    prod_status = serializers.IntegerField(min_value=0, max_value=999)
    mirror_status = serializers.IntegerField(min_value=0, max_value=999)


class ComparisonSerializer(serializers.Serializer):
    service = serializers.CharField(max_length=255)
    prod_version = serializers.CharField(max_length=64)
    version = serializers.CharField(max_length=64)
    path = serializers.CharField(max_length=8192, trim_whitespace=False)
    total = serializers.IntegerField(min_value=1)
    classes = serializers.DictField(child=ClassCountsSerializer())
    body_mismatched = serializers.IntegerField(min_value=0)
    latency_ms = serializers.ListField(
        child=serializers.ListField(
            child=serializers.FloatField(min_value=0), min_length=2, max_length=2
        ),
        max_length=MAX_PAIRS_SENT,
        help_text="[prod ms, mirror ms] pairs.",
    )
    example = ExampleSerializer(required=False)

    def validate_classes(self, value: dict) -> dict:
        unknown = sorted(set(value) - set(STATUS_CLASSES))
        if unknown:
            raise serializers.ValidationError(
                f"Unknown status classes {unknown}; known: {', '.join(STATUS_CLASSES)}."
            )
        return value


class ShadowIngestSerializer(serializers.Serializer):
    gateway = serializers.CharField(max_length=100)
    comparisons = serializers.ListField(child=ComparisonSerializer(), max_length=MAX_COMPARISONS)
    dropped = serializers.IntegerField(
        min_value=0, default=0, help_text="Copies not sent: too many were in flight."
    )


class ShadowAcceptedSerializer(serializers.Serializer):
    accepted = serializers.IntegerField()
    unattributed = serializers.IntegerField(help_text="Of no active release: not kept.")
    refused = serializers.DictField(child=serializers.IntegerField())
