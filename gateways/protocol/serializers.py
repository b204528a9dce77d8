"""The shapes of the gateway endpoints, for their OpenAPI description (drf-spectacular reads
them from protocol/views.py). The endpoints themselves parse their few inputs by hand, in
protocol/endpoints.py, to stay lean; these name the same limits."""

from rest_framework import serializers

from gateways.models import Gateway
from gateways.protocol.endpoints import (
    MAX_ACK_ERROR_LENGTH,
    MAX_REASON_LENGTH,
    MAX_RECORD_LENGTH,
    MAX_SKIPPED,
    MAX_WAIT,
)


class PollQuerySerializer(serializers.Serializer):
    known = serializers.IntegerField(
        min_value=0, required=False, help_text="The generation the gateway runs."
    )
    wait = serializers.FloatField(
        min_value=0,
        max_value=MAX_WAIT,
        required=False,
        help_text="Seconds to wait for a newer generation (default 0).",
    )
    applied = serializers.IntegerField(
        min_value=0,
        required=False,
        help_text=(
            'The generation the gateway applied since its last poll: its ack {"generation": '
            "N} folded into the poll (an error ack, skipped records or the engine: the ack "
            "endpoint)."
        ),
    )


class GatewayDocumentSerializer(serializers.Serializer):
    """The gateway document: what gateways route by (docs/gateway-protocol.md)."""

    generation = serializers.IntegerField(min_value=1)
    revision = serializers.IntegerField(min_value=1)
    checksum = serializers.CharField(help_text="sha256 of gray, versions and services.")
    gray = serializers.DictField(help_text="The policy's rules.")
    versions = serializers.DictField(help_text="Default prod and gray versions.")
    services = serializers.DictField(
        child=serializers.DictField(),
        help_text="Per service: prod and gray versions, routable instances.",
    )


class SkippedRecordSerializer(serializers.Serializer):
    record = serializers.CharField(
        max_length=MAX_RECORD_LENGTH,
        help_text="Which record, e.g. services.user-app.instances[10.0.0.5#7201#DEFAULT#user-app].",
    )
    reason = serializers.CharField(
        max_length=MAX_REASON_LENGTH, help_text="Why, e.g. port: 0 is not a port."
    )


class AckSerializer(serializers.Serializer):
    generation = serializers.IntegerField(min_value=0)
    error = serializers.CharField(
        required=False,
        max_length=MAX_ACK_ERROR_LENGTH,
        help_text=(
            "Set when the gateway refused this generation (it keeps running the one it "
            "ran): recorded as its last_error; its acked generation stays."
        ),
    )
    # DRF hands max_length on to the ListSerializer of many=True; its stubs leave it out.
    skipped = SkippedRecordSerializer(  # type: ignore[call-arg]
        many=True,
        required=False,
        max_length=MAX_SKIPPED,
        help_text=(
            "Records of this generation the gateway runs it without (it applied the rest): "
            "it is acked all the same (in sync), and they show in its row."
        ),
    )


class AckRecordedSerializer(serializers.Serializer):
    name = serializers.CharField()
    acked_generation = serializers.IntegerField()
    status = serializers.ChoiceField(
        choices=[Gateway.IN_SYNC, Gateway.PENDING, Gateway.FAILING, Gateway.STALE]
    )


class DetailSerializer(serializers.Serializer):
    detail = serializers.CharField()
