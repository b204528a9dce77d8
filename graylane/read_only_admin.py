from django.contrib import admin


class ReadOnlyAdmin(admin.ModelAdmin):
    """An admin to look at records that change only through their own paths (the policy
    editor and API lock, validate and audit; gateways show their token once; the system
    makes generations)."""

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False
