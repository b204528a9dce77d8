from django.contrib import admin

from graylane.read_only_admin import ReadOnlyAdmin
from rollouts.models import Release, ReleaseEvent


@admin.register(Release)
class ReleaseAdmin(ReadOnlyAdmin):
    list_display = ["id", "service", "from_version", "to_version", "state", "step", "created_at"]
    list_filter = ["state"]


@admin.register(ReleaseEvent)
class ReleaseEventAdmin(ReadOnlyAdmin):
    list_display = ["at", "release", "kind", "step"]
