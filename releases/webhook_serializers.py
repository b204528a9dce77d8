"""A webhook as `/api/v1/webhooks/` takes and shows it: the secret is write-only."""

from django.conf import settings
from rest_framework import serializers

from releases.models import Webhook


class WebhookSerializer(serializers.ModelSerializer):
    secret = serializers.CharField(
        write_only=True,
        required=False,
        allow_blank=True,
        max_length=200,
        style={"input_type": "password"},
    )
    has_secret = serializers.SerializerMethodField()
    owner = serializers.SerializerMethodField()

    class Meta:
        model = Webhook
        fields = ["id", "name", "url", "kind", "secret", "has_secret", "enabled", "owner",
                  "created_at"]  # fmt: skip
        read_only_fields = ["created_at"]

    def get_has_secret(self, webhook: Webhook) -> bool:
        return bool(webhook.secret)

    def get_owner(self, webhook: Webhook) -> str | None:
        """Its owner's username; none: the admins' only."""
        return webhook.owner.get_username() if webhook.owner else None

    def validate_url(self, value: str) -> str:
        if refusal := settings.OUTBOUND_POLICY.url_refusal(value):
            raise serializers.ValidationError(refusal)
        return value
