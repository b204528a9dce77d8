import hashlib
import secrets
from typing import TypeAlias

from django.conf import settings
from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.models import AnonymousUser, User
from django.db import models

# Who a request is from: the signed-in user, or the anonymous one.
AnyUser: TypeAlias = User | AnonymousUser


def hash_token(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


class ApiTokenQuerySet(models.QuerySet["ApiToken"]):
    def issue(self, user: AbstractBaseUser, name: str = "") -> tuple["ApiToken", str]:
        """Create a token and return it with its key; only the hash is stored, so the key
        is shown once."""
        key = secrets.token_hex(20)
        token = self.create(user=user, name=name, key_hash=hash_token(key), prefix=key[:8])
        return token, key


class ApiToken(models.Model):
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    name = models.CharField(max_length=100, blank=True)
    key_hash = models.CharField(max_length=64, unique=True, editable=False)
    prefix = models.CharField(
        max_length=8, editable=False, help_text="First characters of the key."
    )
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)

    objects = ApiTokenQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        verbose_name = "API token"

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.user})"


class ServiceBinding(models.Model):
    """A `service` user bound to a service of the fleet: its instances may read that
    service's replay samples (personal data), and no other service's."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="service_bindings"
    )
    # A name, not a key: an instance is bound before its service is first registered.
    service = models.CharField(max_length=255)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["user__username", "service"]
        constraints = [
            models.UniqueConstraint(fields=["user", "service"], name="one_binding_per_service")
        ]

    def __str__(self) -> str:
        return f"{self.user} → {self.service}"
