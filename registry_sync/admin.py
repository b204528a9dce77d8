from django import forms
from django.contrib import admin

from accounts.secret_fields import MAX_PASSWORD_LENGTH
from registry_sync.models import MAX_TOKEN_LENGTH, Instance, Registry, Service

KEEP_STORED = "Write-only: leave empty to keep the stored one."


class RegistryForm(forms.ModelForm):
    # Registries sit on internal networks, usually plain http.
    base_url = forms.URLField(required=False, assume_scheme="http")
    password = forms.CharField(
        required=False,
        max_length=MAX_PASSWORD_LENGTH,
        widget=forms.PasswordInput(render_value=False),
        help_text=KEEP_STORED,
    )
    token = forms.CharField(
        required=False,
        max_length=MAX_TOKEN_LENGTH,
        widget=forms.PasswordInput(render_value=False),
        help_text=f"Kubernetes: a bearer (service-account) token; Consul: the ACL token. "
        f"{KEEP_STORED}",
    )

    class Meta:
        model = Registry
        fields = [
            "name", "kind", "base_url", "namespace", "group", "api_version", "username",
            "password", "version_label", "token", "kubeconfig", "datacenter", "version_key",
            "sync_interval", "enabled",
            "default_version",
        ]  # fmt: skip

    def clean_password(self):
        return self.cleaned_data["password"] or (self.instance.password if self.instance else "")

    def clean_token(self) -> str:
        return self.cleaned_data["token"] or (self.instance.token if self.instance else "")


@admin.register(Registry)
class RegistryAdmin(admin.ModelAdmin):
    form = RegistryForm
    list_display = ("name", "kind", "base_url", "enabled", "stale", "last_success_at")
    list_filter = ("kind", "enabled", "stale")
    readonly_fields = (
        "stale", "last_error", "skipped_instances", "last_sync_at", "last_success_at",
    )  # fmt: skip


class InstanceInline(admin.TabularInline):
    model = Instance
    extra = 0
    fields = ("instance_id", "host", "port", "version", "state", "healthy", "enabled", "weight")
    readonly_fields = fields


@admin.register(Service)
class ServiceAdmin(admin.ModelAdmin):
    list_display = ("name", "registry", "group", "protected", "first_seen")
    list_filter = ("registry", "protected")
    search_fields = ("name",)
    inlines = [InstanceInline]


@admin.register(Instance)
class InstanceAdmin(admin.ModelAdmin):
    list_display = ("service", "host", "port", "version", "state", "healthy", "enabled")
    list_filter = ("state", "version", "service__registry")
    search_fields = ("instance_id", "host", "service__name")
    readonly_fields = ("last_seen",)
