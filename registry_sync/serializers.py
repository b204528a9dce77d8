from rest_framework import serializers

from registry_sync.models import Instance, Registry


class ServiceSerializer(serializers.Serializer):
    name = serializers.CharField()
    registry = serializers.CharField(allow_null=True)
    prod_version = serializers.CharField()
    gray_version = serializers.CharField()
    override = serializers.DictField(child=serializers.CharField())
    instances = serializers.DictField(child=serializers.IntegerField())


class ServiceVersionsSerializer(serializers.Serializer):
    """PATCH body; validated by releases.documents.normalize_override."""

    prod_version = serializers.CharField(required=False, allow_null=True)
    gray_version = serializers.CharField(required=False, allow_null=True)


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
        write_only=True, required=False, allow_blank=True, style={"input_type": "password"}
    )
    has_password = serializers.SerializerMethodField()

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
            "sync_interval",
            "enabled",
            "stale",
            "last_error",
            "last_sync_at",
            "last_success_at",
        ]
        read_only_fields = ["stale", "last_error", "last_sync_at", "last_success_at"]

    def get_has_password(self, registry) -> bool:
        return bool(registry.password)

    def validate_sync_interval(self, value):
        if value < 0.5:
            raise serializers.ValidationError("At least 0.5 seconds.")
        return value

    def validate(self, attrs):
        kind = attrs.get("kind", getattr(self.instance, "kind", Registry.EMBEDDED))
        base_url = attrs.get("base_url", getattr(self.instance, "base_url", ""))
        if kind != Registry.EMBEDDED and not base_url:
            raise serializers.ValidationError({"base_url": ["Required for Nacos and Eureka."]})
        return attrs
