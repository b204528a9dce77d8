from django.contrib import admin

from embedded_registry.models import EmbeddedInstance
from graylane.read_only_admin import ReadOnlyAdmin


@admin.register(EmbeddedInstance)
class EmbeddedInstanceAdmin(ReadOnlyAdmin):
    list_display = ("service", "ip", "port", "cluster", "healthy", "enabled", "last_beat")
    list_filter = ("namespace", "group", "healthy", "enabled")
    search_fields = ("service", "ip")
