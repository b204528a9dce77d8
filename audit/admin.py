from django.contrib import admin

from audit.models import AuditEntry
from graylane.read_only_admin import ReadOnlyAdmin


@admin.register(AuditEntry)
class AuditEntryAdmin(ReadOnlyAdmin):
    list_display = ("at", "actor", "source", "action", "object")
    list_filter = ("source", "action")
    search_fields = ("actor", "object")
