from django.contrib import admin

from registry_sync.models import Instance, Registry, Service


@admin.register(Registry)
class RegistryAdmin(admin.ModelAdmin):
    list_display = ("name", "kind", "base_url", "enabled", "stale", "last_success_at")
    list_filter = ("kind", "enabled", "stale")
    readonly_fields = ("stale", "last_error", "last_sync_at", "last_success_at")


class InstanceInline(admin.TabularInline):
    model = Instance
    extra = 0
    fields = ("instance_id", "host", "port", "version", "state", "healthy", "enabled", "weight")
    readonly_fields = fields


@admin.register(Service)
class ServiceAdmin(admin.ModelAdmin):
    list_display = ("name", "registry", "group", "first_seen")
    list_filter = ("registry",)
    search_fields = ("name",)
    inlines = [InstanceInline]


@admin.register(Instance)
class InstanceAdmin(admin.ModelAdmin):
    list_display = ("service", "host", "port", "version", "state", "healthy", "enabled")
    list_filter = ("state", "version", "service__registry")
    search_fields = ("instance_id", "host", "service__name")
    readonly_fields = ("last_seen",)
