from django.contrib import admin

from graylane.read_only_admin import ReadOnlyAdmin
from rollouts.models import Release, ReleaseEvent, Webhook, WebhookDelivery


@admin.register(Release)
class ReleaseAdmin(ReadOnlyAdmin):
    list_display = ["id", "service", "from_version", "to_version", "state", "step", "created_at"]
    list_filter = ["state"]


@admin.register(ReleaseEvent)
class ReleaseEventAdmin(ReadOnlyAdmin):
    list_display = ["at", "release", "kind", "step"]


@admin.register(Webhook)
class WebhookAdmin(admin.ModelAdmin):
    list_display = ["name", "kind", "url", "enabled"]
    list_filter = ["kind", "enabled"]


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(ReadOnlyAdmin):
    list_display = ["at", "webhook", "event", "attempt", "status_code", "ok"]
    list_filter = ["ok"]
