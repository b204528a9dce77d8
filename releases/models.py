from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Q

from accounts.secret_fields import EncryptedTextField
from releases import states
from routing_engine.lanes import GRAY_LANE


class ReleaseBundle(models.Model):
    """Several services released as one: their releases share steps and analysis settings,
    start, pause, advance and promote together in dependency order (`Release.position`),
    and roll back together in the reverse order when any of them fails."""

    name = models.CharField(max_length=100)
    created_by = models.CharField(max_length=150, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"bundle {self.pk} {self.name}"

    def members(self) -> list["Release"]:
        """Its releases in dependency order (prefetched ones are not read again)."""
        return sorted(self.releases.all(), key=lambda member: member.position)

    def state(self) -> str:
        """The one state the API and the pages show for it."""
        return states.common_state([member.state for member in self.members()])


class Release(models.Model):
    """One service's progressive release of `to_version` over `from_version` (prod) in a
    lane: steps of gray traffic, each advanced by the analysis (releases/analysis.py) or an
    operator. Its current step is its service's member entry in its lane, written to the
    live document (policy.release_routing), a revision per change."""

    service = models.CharField(max_length=255)
    from_version = models.CharField(max_length=64)
    to_version = models.CharField(max_length=64)
    lane = models.CharField(max_length=63, default=GRAY_LANE)
    # The service's routing in its lane when it started (policy.release_routing.Routing):
    # what abort, rollback and a failure put back exactly. Null until it starts.
    routing_before = models.JSONField(null=True, blank=True)
    state = models.CharField(
        max_length=20, choices=[(s, s) for s in states.STATES], default=states.PENDING
    )
    step = models.PositiveIntegerField(default=0, help_text="Index of the current step.")
    steps = models.JSONField()
    analysis = models.JSONField()
    created_by = models.CharField(max_length=150, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    # Bookkeeping of the analysis: when the current step began (progress deadline), the
    # end (epoch seconds, exclusive) of the last analysed window, the failed intervals,
    # and both versions' figures since the start.
    step_started_at = models.DateTimeField(null=True, blank=True)
    # When a `scheduled` release starts by itself.
    scheduled_at = models.DateTimeField(null=True, blank=True)
    analysed_until = models.PositiveBigIntegerField(null=True, blank=True)
    failures = models.PositiveIntegerField(default=0)
    figures = models.JSONField(default=dict, blank=True)
    bundle = models.ForeignKey(
        ReleaseBundle, null=True, blank=True, on_delete=models.PROTECT, related_name="releases"
    )
    position = models.PositiveIntegerField(default=0, help_text="Dependency order in a bundle.")
    # The services of its bundle it calls (released before it: releases/bundle_order.py).
    depends_on = models.JSONField(default=list, blank=True)
    # The step this release's analysis found healthy, while a bundle waits for the others.
    ready_at_step = models.PositiveIntegerField(null=True, blank=True)
    # The current step while its gateways have not all acked it (releases/convergence.py):
    # its policy revision, generation, acks so far and the event it waits to write; empty
    # once the step is applied.
    convergence = models.JSONField(default=dict, blank=True)
    # Shadow traffic while it runs: `{"percent": p}` of the service's prod requests copied to
    # `to_version` (routing_engine.mirror), or null.
    mirror = models.JSONField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            # Releases of one service in two lanes may run at once.
            models.UniqueConstraint(
                fields=["service", "lane"],
                condition=Q(state__in=states.ACTIVE),
                name="releases_one_active_release_per_service_lane",
            )
        ]

    def __str__(self) -> str:
        return f"release {self.pk} of {self.service} {self.to_version}"

    def step_label(self, index: int | None = None) -> str:
        step = self.steps[self.step if index is None else index]
        if step.get("approval"):
            return "approval"
        return "targeted users" if step.get("targeted") else f"{step['percent']} %"

    def is_approval_step(self, index: int | None = None) -> bool:
        """Whether the step (the current one by default) waits for an operator's approval."""
        return bool(self.steps[self.step if index is None else index].get("approval"))


class ReleaseEvent(models.Model):
    KINDS = [
        (kind, kind)
        for kind in (
            "created",
            "scheduled",
            "frozen",
            "start_refused",
            "started",
            "analysis",
            "insufficient_data",
            "advanced",
            "paused",
            "resumed",
            "awaiting_approval",
            "approved",
            "promoted",
            "rolled_back",
            "aborted",
            "failed",
            "not_converged",
        )
    ]

    release = models.ForeignKey(Release, on_delete=models.CASCADE, related_name="events")
    at = models.DateTimeField(auto_now_add=True)
    kind = models.CharField(max_length=20, choices=KINDS)
    step = models.PositiveIntegerField()
    detail = models.JSONField(default=dict)
    actor = models.CharField(max_length=150, blank=True)

    class Meta:
        ordering = ["-at", "-id"]
        indexes = [models.Index(fields=["release", "-at"], name="releases_event_timeline")]

    def __str__(self) -> str:
        return f"{self.kind} of release {self.release_id}"

    def why(self) -> str:
        """Why it happened, as the timelines show it."""
        return self.detail.get("reason") or self.detail.get("routing") or ""


class Webhook(models.Model):
    """Where release notifications go: a generic JSON body, or a Slack-compatible one
    (`{"text": ...}`), signed with `secret` (gateways/signing.py's `X-Graylane-Signature`)
    when one is set. Operators manage their own, admins all; one without an owner (made in
    the admin, or its owner deleted) is the admins' only."""

    GENERIC = "generic"
    SLACK = "slack"

    name = models.CharField(max_length=100, unique=True)
    url = models.URLField(max_length=500)
    kind = models.CharField(
        max_length=10, choices=[(GENERIC, "generic JSON"), (SLACK, "Slack")], default=GENERIC
    )
    secret = EncryptedTextField(max_length=200, blank=True)
    enabled = models.BooleanField(default=True)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="webhooks",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        super().clean()
        if refusal := settings.OUTBOUND_POLICY.url_refusal(self.url):
            raise ValidationError({"url": refusal})


class WebhookDelivery(models.Model):
    """One attempt to deliver one release event to one webhook."""

    webhook = models.ForeignKey(Webhook, on_delete=models.CASCADE, related_name="deliveries")
    event = models.ForeignKey(ReleaseEvent, on_delete=models.CASCADE, related_name="deliveries")
    attempt = models.PositiveIntegerField()
    at = models.DateTimeField(auto_now_add=True)
    status_code = models.PositiveIntegerField(null=True, blank=True)
    error = models.CharField(max_length=500, blank=True)
    ok = models.BooleanField(default=False)

    class Meta:
        ordering = ["-at", "-id"]
        verbose_name_plural = "webhook deliveries"

    def __str__(self) -> str:
        return f"{self.event} to {self.webhook} (attempt {self.attempt})"


class ShadowComparison(models.Model):
    """What a release's shadow traffic found on one path: copies of prod requests sent to its
    `to_version`, compared with prod's answers by the gateways (releases/shadow.py). At most
    shadow.MAX_PATHS rows per release, each with at most shadow.MAX_PAIRS latency pairs."""

    release = models.ForeignKey(
        Release, on_delete=models.CASCADE, related_name="shadow_comparisons"
    )
    path = models.CharField(max_length=512)
    total = models.PositiveBigIntegerField(default=0)
    # By prod's status class ("2xx"...): {"total", "mismatched"} (the copy's class differed).
    classes = models.JSONField(default=dict)
    # Same status class, another body.
    body_mismatched = models.PositiveBigIntegerField(default=0)
    latency_ms = models.JSONField(default=list)  # the latest [prod, mirror] pairs
    example = models.JSONField(default=dict)  # the latest difference's statuses
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["release", "path"], name="releases_shadow_path")
        ]

    def __str__(self) -> str:
        return f"release {self.release_id} {self.path}"
