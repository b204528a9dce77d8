from django.contrib import admin

from gateways.models import DocumentService, Gateway, Generation
from graylane.read_only_admin import ReadOnlyAdmin


@admin.register(Gateway)
class GatewayAdmin(ReadOnlyAdmin):
    list_display = (
        "name",
        "mode",
        "endpoint",
        "acked_generation",
        "last_seen",
        "attempts",
        "fronts",
        "refused_samples",
    )
    list_filter = ("mode",)
    exclude = ("nacos_password", "push_secret", "token_hash")


@admin.register(Generation)
class GenerationAdmin(ReadOnlyAdmin):
    list_display = ("number", "revision", "checksum", "reason", "created_at")
    exclude = ("content",)


@admin.register(DocumentService)
class DocumentServiceAdmin(ReadOnlyAdmin):
    list_display = ("name", "first_generation", "until_generation")
    search_fields = ("name",)
