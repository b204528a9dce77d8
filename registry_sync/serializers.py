from rest_framework import serializers

from registry_sync.models import Instance


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
