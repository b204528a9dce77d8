from django.contrib import admin

from graylane.read_only_admin import ReadOnlyAdmin
from policy.models import Freeze, PolicyDraft, PolicyState, Revision


@admin.register(PolicyState)
class PolicyStateAdmin(ReadOnlyAdmin):
    list_display = ("revision", "updated_at", "updated_by")


@admin.register(Revision)
class RevisionAdmin(ReadOnlyAdmin):
    list_display = ("number", "created_at", "author", "source", "comment", "checksum")
    list_filter = ("source",)
    search_fields = ("author", "comment")


@admin.register(Freeze)
class FreezeAdmin(admin.ModelAdmin):
    list_display = ("starts_at", "ends_at", "reason", "created_by")
    search_fields = ("reason",)


@admin.register(PolicyDraft)
class PolicyDraftAdmin(ReadOnlyAdmin):
    """Decided through the API (approve, reject), which checks who may and audits it."""

    list_display = ("id", "object_label", "author", "created_at", "state", "decided_by")
    list_filter = ("state",)
    search_fields = ("author", "object_label", "comment")
