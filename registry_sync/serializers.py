import json
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.contrib.auth.models import AnonymousUser
from rest_framework import serializers

from accounts.secret_fields import MAX_PASSWORD_LENGTH
from registry_sync.models import (
    CREDENTIALS_IN_URL,
    MAX_TOKEN_LENGTH,
    Instance,
    LifecycleEvent,
    Registry,
    kubernetes_problems,
    url_has_credentials,
)
from routing_engine import has_control_characters

PORT_RANGE = "The port must be from 1 to 65535."


def port_in_range(url: str) -> bool:
    """Django's URLValidator takes any 5 digits for a port (http://10.0.0.1:99999/)."""
    try:
        return urlsplit(url).port != 0
    except ValueError:
        return False


class InstanceSerializer(serializers.ModelSerializer):
    last_seen = serializers.SerializerMethodField()

    class Meta:
        model = Instance
        fields = [
            "id",
            "instance_id",
            "host",
            "port",
            "version",
            "state",
            "healthy",
            "enabled",
            "weight",
            "metadata",
            "last_seen",
            "offline_intent",
            "drain_until",
            "note",
        ]

    def get_last_seen(self, row) -> str | None:
        """A sync writes only rows that changed, so a present instance was last seen at its
        registry's last successful sync."""
        seen = row.last_seen
        registry = row.service.registry
        if row.state != Instance.DOWN and registry is not None and registry.last_success_at:
            seen = max(filter(None, (seen, registry.last_success_at)))
        return serializers.DateTimeField().to_representation(seen) if seen else None


class RegistrySerializer(serializers.ModelSerializer):
    password = serializers.CharField(
        write_only=True,
        required=False,
        allow_blank=True,
        max_length=MAX_PASSWORD_LENGTH,
        style={"input_type": "password"},
    )
    has_password = serializers.SerializerMethodField()
    token = serializers.CharField(
        write_only=True,
        required=False,
        allow_blank=True,
        max_length=MAX_TOKEN_LENGTH,
        style={"input_type": "password"},
        help_text="Kubernetes: a bearer token; Consul: the ACL token (write-only, stored "
        "encrypted).",
    )
    has_token = serializers.SerializerMethodField()
    last_error = serializers.SerializerMethodField()

    class Meta:
        model = Registry
        fields = [
            "id",
            "name",
            "kind",
            "base_url",
            "namespace",
            "group",
            "api_version",
            "username",
            "password",
            "has_password",
            "version_label",
            "token",
            "has_token",
            "kubeconfig",
            "datacenter",
            "version_key",
            "sync_interval",
            "enabled",
            "default_version",
            "stale",
            "last_error",
            "skipped_instances",
            "last_sync_at",
            "last_success_at",
        ]
        read_only_fields = [
            "stale", "last_error", "skipped_instances", "last_sync_at", "last_success_at",
        ]  # fmt: skip

    def get_has_password(self, registry) -> bool:
        return bool(registry.password)

    def get_has_token(self, registry: Registry) -> bool:
        return bool(registry.token)

    def get_last_error(self, registry) -> str:
        """Why the last sync failed (admins), or that the registry is unreachable (others);
        or which instances a good sync skipped."""
        request = self.context.get("request")
        return registry.last_error_for(request.user if request else AnonymousUser())

    def validate_base_url(self, value):
        if url_has_credentials(value):
            raise serializers.ValidationError(CREDENTIALS_IN_URL)
        if not port_in_range(value):
            raise serializers.ValidationError(PORT_RANGE)
        if refusal := settings.OUTBOUND_POLICY.url_refusal(value):
            raise serializers.ValidationError(refusal)
        return value

    def validate_sync_interval(self, value):
        if value < 0.5:
            raise serializers.ValidationError("At least 0.5 seconds.")
        return value

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        def value(name: str, default: str = "") -> str:
            return attrs.get(name, getattr(self.instance, name, default))

        kind = value("kind", Registry.EMBEDDED)
        if kind in (Registry.NACOS, Registry.EUREKA, Registry.CONSUL) and not value("base_url"):
            raise serializers.ValidationError(
                {"base_url": ["Required for Nacos, Eureka and Consul."]}
            )
        if kind == Registry.KUBERNETES:
            if self.instance is None and "namespace" not in attrs:
                attrs["namespace"] = "default"  # Kubernetes' own default, not Nacos' "public"
            problems = kubernetes_problems(
                base_url=value("base_url"),
                namespace=value("namespace"),
                token=value("token"),
                kubeconfig=value("kubeconfig"),
            )
            if problems:
                raise serializers.ValidationError(
                    {name: [message] for name, message in problems.items()}
                )
        return attrs


MAX_DETAIL_BYTES = 4096


class LifecycleEventSerializer(serializers.ModelSerializer):
    """A lifecycle event as reported (POST) and as listed (GET)."""

    service = serializers.CharField(max_length=255)
    host = serializers.CharField(max_length=255)
    port = serializers.IntegerField(min_value=1, max_value=65535)
    event = serializers.ChoiceField(choices=LifecycleEvent.EVENTS)
    detail = serializers.JSONField(required=False, default=dict)

    class Meta:
        model = LifecycleEvent
        fields = ["id", "service", "host", "port", "event", "at", "detail", "received_at",
                  "reporter"]  # fmt: skip
        read_only_fields = ["id", "received_at", "reporter"]

    def _plain_text(self, value: str) -> str:
        if has_control_characters(value):
            raise serializers.ValidationError("No control characters.")
        return value

    def validate_service(self, value):
        return self._plain_text(value)

    def validate_host(self, value):
        return self._plain_text(value)

    def validate_detail(self, value):
        if not isinstance(value, dict):
            raise serializers.ValidationError("A JSON object.")
        if len(json.dumps(value)) > MAX_DETAIL_BYTES:
            raise serializers.ValidationError(f"At most {MAX_DETAIL_BYTES} bytes of JSON.")
        return value


class LifecycleQuerySerializer(serializers.Serializer):
    since = serializers.DateTimeField(required=False, help_text="Only events at or after it.")
