from django.contrib import admin

from gateways.models import Gateway, Generation


class ReadOnlyAdmin(admin.ModelAdmin):
    """For looking only: gateways are managed through /api/v1/gateways/ (which shows the
    token once, audits changes and redelivers), generations are made by the system."""

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(Gateway)
class GatewayAdmin(ReadOnlyAdmin):
    list_display = ("name", "mode", "endpoint", "acked_generation", "last_seen", "attempts")
    list_filter = ("mode",)
    exclude = ("nacos_password", "push_secret", "token_hash")


@admin.register(Generation)
class GenerationAdmin(ReadOnlyAdmin):
    list_display = ("number", "revision", "checksum", "reason", "created_at")
    exclude = ("content",)
