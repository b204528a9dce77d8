from django.contrib import admin

from releases.models import AuditEntry, PolicyState, Revision


class ReadOnlyAdmin(admin.ModelAdmin):
    """History is changed only through the policy editor and API, which validate, lock and
    audit; the admin shows it."""

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(PolicyState)
class PolicyStateAdmin(ReadOnlyAdmin):
    list_display = ("revision", "updated_at", "updated_by")


@admin.register(Revision)
class RevisionAdmin(ReadOnlyAdmin):
    list_display = ("number", "created_at", "author", "source", "comment", "checksum")
    list_filter = ("source",)
    search_fields = ("author", "comment")


@admin.register(AuditEntry)
class AuditEntryAdmin(ReadOnlyAdmin):
    list_display = ("at", "actor", "source", "action", "object")
    list_filter = ("source", "action")
    search_fields = ("actor", "object")
