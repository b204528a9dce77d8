from django.contrib import admin
from django.http import HttpRequest

from accounts.models import ApiToken, ServiceBinding


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ("prefix", "user", "name", "created_at", "last_used_at")
    list_filter = ("user",)
    readonly_fields = ("prefix", "created_at", "last_used_at")

    def has_add_permission(self, request: HttpRequest) -> bool:
        # Keys are shown once, so they are issued with `manage.py issue_token`.
        return False


@admin.register(ServiceBinding)
class ServiceBindingAdmin(admin.ModelAdmin):
    list_display = ("user", "service", "created_at")
    list_filter = ("service",)
    search_fields = ("user__username", "service")
