from django.contrib import admin

from graylane.read_only_admin import ReadOnlyAdmin
from policy.models import PolicyState, Revision


@admin.register(PolicyState)
class PolicyStateAdmin(ReadOnlyAdmin):
    list_display = ("revision", "updated_at", "updated_by")


@admin.register(Revision)
class RevisionAdmin(ReadOnlyAdmin):
    list_display = ("number", "created_at", "author", "source", "comment", "checksum")
    list_filter = ("source",)
    search_fields = ("author", "comment")
