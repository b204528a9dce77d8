from rest_framework import serializers

from audit.models import AuditEntry


class AuditEntrySerializer(serializers.ModelSerializer):
    class Meta:
        model = AuditEntry
        fields = ["id", "at", "actor", "source", "action", "object", "before", "after"]
