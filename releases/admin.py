from django import forms
from django.contrib import admin

from graylane.read_only_admin import ReadOnlyAdmin
from releases.models import Release, ReleaseEvent, Webhook, WebhookDelivery


@admin.register(Release)
class ReleaseAdmin(ReadOnlyAdmin):
    list_display = [
        "id",
        "service",
        "from_version",
        "to_version",
        "lane",
        "state",
        "step",
        "created_at",
    ]
    list_filter = ["state", "lane"]


@admin.register(ReleaseEvent)
class ReleaseEventAdmin(ReadOnlyAdmin):
    list_display = ["at", "release", "kind", "step"]


class WebhookForm(forms.ModelForm):
    # A URL typed without a scheme: receivers are https (Slack's are), and Django 6 assumes so.
    url = forms.URLField(max_length=500, assume_scheme="https")

    class Meta:
        model = Webhook
        fields = ["name", "url", "kind", "secret", "enabled", "owner"]


@admin.register(Webhook)
class WebhookAdmin(admin.ModelAdmin):
    form = WebhookForm
    list_display = ["name", "kind", "url", "enabled", "owner"]
    list_filter = ["kind", "enabled"]


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(ReadOnlyAdmin):
    list_display = ["at", "webhook", "event", "attempt", "status_code", "ok"]
    list_filter = ["ok"]
