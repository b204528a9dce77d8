import re
from typing import Any

from django.conf import settings
from rest_framework import serializers

from accounts.secret_fields import MAX_PASSWORD_LENGTH
from gateways.generation import revision_of
from gateways.models import Gateway
from registry_sync.serializers import PORT_RANGE, port_in_range

# Nacos ParamUtils.validChars: letters, digits and _ - . : (the Nacos config Open API).
NACOS_NAME = re.compile(r"^[A-Za-z0-9_.:-]+$")
YAML_PREFIX = re.compile(r"^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$")
MAX_FRONTS = 1000
# What a change must redeliver: where and how the gateway gets its document.
DELIVERY_FIELDS = (
    "mode",
    "endpoint",
    "data_id",
    "group",
    "namespace",
    "yaml_prefix",
    "nacos_username",
    "nacos_password",
)


class ServiceNameField(serializers.CharField):
    """A service name as JSON gives it: a string (DRF's CharField would take 1 for "1")."""

    def to_internal_value(self, data: Any) -> Any:
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class GatewayStatusSerializer(serializers.ModelSerializer):
    """The contract's fields (name, mode, endpoint, status, desired_generation,
    acked_generation, last_seen, last_error, skipped), the failed attempts, the services it
    fronts and the metric samples it was refused: what the gateways page shows, sent on the
    live stream whenever they change. Needs `generation` (the current one) and `now` in its
    context."""

    status = serializers.SerializerMethodField()
    desired_generation = serializers.SerializerMethodField()
    desired_revision = serializers.SerializerMethodField(
        help_text="The policy revision the current generation was built from."
    )
    acked_revision = serializers.SerializerMethodField(
        help_text="The policy revision the acked generation was built from; null before the "
        "first ack, or once that generation is over a day old and forgotten."
    )
    skipped = serializers.ListField(
        child=serializers.DictField(child=serializers.CharField()),
        read_only=True,
        help_text='Records of the acked generation the gateway runs without: {"record", '
        '"reason"} each (it is in sync all the same).',
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._revisions: dict[int, int | None] = {}

    class Meta:
        model = Gateway
        fields = [
            "name",
            "mode",
            "endpoint",
            "status",
            "desired_generation",
            "desired_revision",
            "acked_generation",
            "acked_revision",
            "last_seen",
            "last_error",
            "skipped",
            "attempts",
            "engine",
            "engine_version",
            "fronts",
            "refused_samples",
            "last_refused",
            "last_refused_at",
        ]
        read_only_fields = fields

    def get_status(self, gateway: Gateway) -> str:
        return gateway.status_at(self.context["generation"], self.context["now"])

    def get_desired_generation(self, gateway: Gateway) -> int:
        # Every gateway should run the current generation.
        return self.context["generation"]

    def get_desired_revision(self, gateway: Gateway) -> int | None:
        return self._revision_of(self.context["generation"])

    def get_acked_revision(self, gateway: Gateway) -> int | None:
        return self._revision_of(gateway.acked_generation)

    def _revision_of(self, generation: int) -> int | None:
        # Gateways mostly run the same few generations: one query for each, per answer (a
        # list's rows share one child serializer).
        if generation not in self._revisions:
            self._revisions[generation] = revision_of(generation)
        return self._revisions[generation]


class GatewaySerializer(GatewayStatusSerializer):
    """The API's: the status fields and the rest (delivery settings, times)."""

    endpoint = serializers.URLField(required=False, allow_blank=True, max_length=200)
    nacos_password = serializers.CharField(
        write_only=True, required=False, allow_blank=True, max_length=MAX_PASSWORD_LENGTH
    )
    fronts = serializers.ListField(
        child=ServiceNameField(max_length=255),
        required=False,
        max_length=MAX_FRONTS,
        help_text="Names of the services this gateway fronts: it may report metrics of those "
        "only, and only those count in release analysis. Empty (the default): every service "
        "of the gateway document it runs.",
    )

    class Meta:
        model = Gateway
        fields = [
            *GatewayStatusSerializer.Meta.fields,
            "acked_at",
            "last_attempt_at",
            "token_prefix",
            "data_id",
            "group",
            "namespace",
            "yaml_prefix",
            "nacos_username",
            "nacos_password",
            "created_at",
        ]
        read_only_fields = [
            "acked_generation",
            "last_seen",
            "last_error",
            "skipped",
            "attempts",
            "refused_samples",
            "last_refused",
            "last_refused_at",
            "acked_at",
            "last_attempt_at",
            "token_prefix",
            "created_at",
        ]

    def validate_endpoint(self, value: str) -> str:
        if value and not value.lower().startswith(("http://", "https://")):
            raise serializers.ValidationError("An http:// or https:// URL.")
        if value and not port_in_range(value):
            raise serializers.ValidationError(PORT_RANGE)
        if refusal := settings.OUTBOUND_POLICY.url_refusal(value):
            raise serializers.ValidationError(refusal)
        return value

    def _nacos_name(self, value: str, *, blank: bool = False) -> str:
        if (value or not blank) and not NACOS_NAME.match(value):
            raise serializers.ValidationError("Letters, digits and _ - . : only.")
        return value

    def validate_data_id(self, value: str) -> str:
        return self._nacos_name(value)

    def validate_group(self, value: str) -> str:
        return self._nacos_name(value)

    def validate_namespace(self, value: str) -> str:
        return self._nacos_name(value, blank=True)

    def validate_fronts(self, value: list[str]) -> list[str]:
        return sorted(set(value))

    def validate_yaml_prefix(self, value: str) -> str:
        if value and not YAML_PREFIX.match(value):
            raise serializers.ValidationError("Dotted keys, e.g. kerwin.tool.")
        return value

    def validate(self, attrs: dict) -> dict:
        instance = self.instance
        mode = attrs.get("mode", instance.mode if instance else Gateway.PULL)
        endpoint = attrs.get("endpoint", instance.endpoint if instance else "")
        if mode != Gateway.PULL and not endpoint:
            raise serializers.ValidationError(
                {"endpoint": [f"A {mode} gateway needs an endpoint."]}
            )
        return attrs


class CreatedGatewaySerializer(GatewaySerializer):
    """The answer to a create: the only time the token and the push secret are shown."""

    # Not stored (its hash is): the view hands it over in the context.
    token = serializers.SerializerMethodField()
    push_secret = serializers.CharField(read_only=True)

    class Meta(GatewaySerializer.Meta):
        fields = [*GatewaySerializer.Meta.fields, "token", "push_secret"]

    def get_token(self, gateway: Gateway) -> str:
        return self.context["token"]
