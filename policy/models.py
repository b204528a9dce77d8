import json
from typing import Any

from django.db import models


class PolicyState(models.Model):
    """The one live configuration document (gray policy, default versions, per-service
    version overrides) and the revision it came from. Exactly one row, pk=1; writers lock
    it, so it is also the serialisation point for concurrent edits."""

    revision = models.PositiveIntegerField()
    content = models.TextField(help_text="Canonical JSON of the live document.")
    updated_at = models.DateTimeField()
    updated_by = models.CharField(max_length=150, blank=True)

    class Meta:
        verbose_name = "live policy"
        verbose_name_plural = "live policy"

    def __str__(self) -> str:
        return f"live policy at revision {self.revision}"

    @property
    def document(self) -> dict:
        return json.loads(self.content)


class Revision(models.Model):
    SOURCES = [("ui", "UI"), ("api", "API"), ("rollback", "Rollback"), ("release", "Release")]

    number = models.PositiveIntegerField(unique=True)
    content = models.TextField(editable=False, help_text="Canonical JSON, never rewritten.")
    checksum = models.CharField(max_length=64, editable=False)
    diff = models.JSONField(default=list, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    author = models.CharField(max_length=150, blank=True)
    source = models.CharField(max_length=10, choices=SOURCES)
    comment = models.CharField(max_length=500, blank=True)
    rolled_back_from = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["-number"]

    def __str__(self) -> str:
        return f"revision {self.number}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        if self.pk is not None:
            raise ValueError("Revisions are immutable.")
        super().save(*args, **kwargs)

    @property
    def config(self) -> dict:
        return json.loads(self.content)


class Freeze(models.Model):
    """A window in which no release starts or advances and no policy or lane change of its
    services is made, but by an admin's audited override (policy/freezes.py). No
    services: every service."""

    starts_at = models.DateTimeField()
    ends_at = models.DateTimeField()
    services = models.JSONField(default=list, blank=True)
    reason = models.CharField(max_length=500)
    created_by = models.CharField(max_length=150, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["starts_at", "id"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(ends_at__gt=models.F("starts_at")),
                name="freeze_ends_after_start",
            )
        ]

    def __str__(self) -> str:
        return f"{self.starts_at:%Y-%m-%d %H:%M}–{self.ends_at:%Y-%m-%d %H:%M}: {self.reason}"

    def covers(self, service: str) -> bool:
        return not self.services or service in self.services


DRAFT_STATES = [("pending", "pending"), ("approved", "approved"), ("rejected", "rejected")]


class PolicyDraft(models.Model):
    """A change of a protected service's routing, held for another operator's review
    (policy/drafts.py): the whole document it proposes, made on `base_revision`. Approving
    it publishes that document only while the live one is still at `base_revision`."""

    PENDING, APPROVED, REJECTED = "pending", "approved", "rejected"

    author = models.CharField(max_length=150)
    created_at = models.DateTimeField(auto_now_add=True)
    source = models.CharField(max_length=10, choices=Revision.SOURCES)
    action = models.CharField(max_length=50, help_text="What the change was: `lane.update`...")
    object_label = models.CharField(max_length=200)
    comment = models.CharField(max_length=500, blank=True)
    base_revision = models.PositiveIntegerField()
    content = models.TextField(editable=False, help_text="Canonical JSON of the proposal.")
    services = models.JSONField(default=list, help_text="The protected services it touches.")
    state = models.CharField(max_length=10, choices=DRAFT_STATES, default=PENDING)
    decided_by = models.CharField(max_length=150, blank=True)
    decided_at = models.DateTimeField(null=True, blank=True)
    reason = models.CharField(max_length=500, blank=True)

    class Meta:
        ordering = ["-id"]

    def __str__(self) -> str:
        return f"draft {self.pk} by {self.author}: {self.object_label} ({self.state})"

    @property
    def document(self) -> dict:
        return json.loads(self.content)
