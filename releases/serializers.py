"""Output shapes of the releases API (and their OpenAPI description). Input validation of
the policy lives in routing_engine.policy so the form, the API and gateways share it."""

from rest_framework import serializers

from releases.models import AuditEntry, Revision


class HeaderRuleSerializer(serializers.Serializer):
    name = serializers.CharField(allow_blank=True)
    value = serializers.CharField(allow_blank=True)


class VersionPairSerializer(serializers.Serializer):
    prod = serializers.CharField()
    gray = serializers.CharField()


class PolicySerializer(serializers.Serializer):
    revision = serializers.IntegerField(read_only=True)
    enabled = serializers.BooleanField()
    routing = serializers.BooleanField()
    header = HeaderRuleSerializer()
    ips = serializers.ListField(child=serializers.CharField())
    cities = serializers.ListField(child=serializers.CharField())
    users = serializers.ListField(child=serializers.CharField())
    user_header = serializers.CharField()
    city_header = serializers.CharField()
    percent = serializers.IntegerField(min_value=0, max_value=100)
    versions = VersionPairSerializer()
    updated_at = serializers.DateTimeField(read_only=True)
    updated_by = serializers.CharField(read_only=True)


class RevisionSerializer(serializers.ModelSerializer):
    revision = serializers.IntegerField(source="number")
    author = serializers.CharField()

    class Meta:
        model = Revision
        fields = ["revision", "checksum", "created_at", "author", "comment", "source"]


class RevisionDetailSerializer(RevisionSerializer):
    config = serializers.JSONField()
    diff = serializers.JSONField()

    class Meta(RevisionSerializer.Meta):
        fields = [*RevisionSerializer.Meta.fields, "rolled_back_from", "config", "diff"]


class RollbackSerializer(serializers.Serializer):
    comment = serializers.CharField(required=False, allow_blank=True, max_length=500)


class AuditEntrySerializer(serializers.ModelSerializer):
    class Meta:
        model = AuditEntry
        fields = ["id", "at", "actor", "source", "action", "object", "before", "after"]


class SimulateRequestSerializer(serializers.Serializer):
    service = serializers.CharField(required=False, allow_blank=True, allow_null=True)
    headers = serializers.DictField(child=serializers.CharField(allow_blank=True), required=False)
    ip = serializers.CharField(required=False, allow_blank=True, allow_null=True)
    city = serializers.CharField(required=False, allow_blank=True, allow_null=True)
    user = serializers.CharField(required=False, allow_blank=True, allow_null=True)

    def validate_ip(self, value):
        import ipaddress

        if value:
            try:
                ipaddress.ip_address(value.strip())
            except ValueError:
                raise serializers.ValidationError(f"{value!r} is not an IP address.") from None
            return value.strip()
        return None


class SimulateResponseSerializer(serializers.Serializer):
    flag = serializers.ChoiceField(choices=["ALL", "PROD", "GRAY"])
    version = serializers.CharField(allow_null=True)
    matched = serializers.CharField(allow_null=True)
    revision = serializers.IntegerField()
    instances = serializers.ListField(child=serializers.DictField())
