import secrets
from datetime import datetime, timedelta

from django.conf import settings
from django.db import models

from accounts.models import hash_token
from accounts.secret_fields import MAX_PASSWORD_LENGTH, EncryptedTextField


class GatewayQuerySet(models.QuerySet["Gateway"]):
    def create_with_credentials(self, **fields) -> tuple["Gateway", str, str]:
        """Create a gateway with a new token and push secret, and return both with it: only
        the token's hash is stored, so they are shown once."""
        gateway, token, secret = _with_credentials(fields)
        gateway.save(force_insert=True, using=self.db)
        return gateway, token, secret

    def bulk_create_with_credentials(
        self, names: list[str], **fields: str
    ) -> list[tuple[str, str]]:
        """A gateway per name, as create_with_credentials makes it, in a few INSERTs (a fleet
        of thousands, for a bench); returns each one's (name, token)."""
        made = [_with_credentials({"name": name, **fields}) for name in names]
        gateways: list[Gateway] = [gateway for gateway, _, _ in made]
        Gateway.objects.using(self.db).bulk_create(gateways, batch_size=1000)
        return [(gateway.name, token) for gateway, token, _ in made]


def _with_credentials(fields: dict) -> tuple["Gateway", str, str]:
    """An unsaved gateway with a new token and push secret, and both."""
    token = secrets.token_hex(20)
    secret = secrets.token_hex(32)
    gateway = Gateway(
        token_hash=hash_token(token), token_prefix=token[:8], push_secret=secret, **fields
    )
    return gateway, token, secret


class Gateway(models.Model):
    PULL, PUSH, NACOS = "pull", "push", "nacos"
    MODES = [
        (PULL, "Pull: the gateway long-polls the dashboard"),
        (PUSH, "Push: the dashboard POSTs signed documents to the gateway"),
        (NACOS, "Nacos: the dashboard publishes YAML to a Nacos config center"),
    ]
    IN_SYNC, PENDING, FAILING, STALE = "in_sync", "pending", "failing", "stale"
    STATUSES = (IN_SYNC, PENDING, FAILING, STALE)
    name = models.SlugField(max_length=64, unique=True)
    mode = models.CharField(max_length=8, choices=MODES, default=PULL)
    endpoint = models.URLField(
        blank=True,
        help_text="push: the URL documents are POSTed to; nacos: the server, "
        "e.g. http://127.0.0.1:8848/nacos; pull: unused.",
    )
    data_id = models.CharField(max_length=255, default="gateway-app.yaml")
    group = models.CharField(max_length=128, default="DEFAULT_GROUP")
    namespace = models.CharField(max_length=128, blank=True, help_text="Nacos tenant id.")
    yaml_prefix = models.CharField(
        max_length=128,
        blank=True,
        help_text="Dotted keys the YAML is nested under, e.g. kerwin.tool for the reference "
        "design's gateway (empty: `gray` at the top).",
    )
    nacos_username = models.CharField(max_length=128, blank=True)
    nacos_password = EncryptedTextField(max_length=MAX_PASSWORD_LENGTH, blank=True)
    token_hash = models.CharField(max_length=64, unique=True, editable=False)
    token_prefix = models.CharField(max_length=8, editable=False)
    # Encrypted, not hashed: signing needs the secret itself.
    push_secret = EncryptedTextField(max_length=64, editable=False)
    acked_generation = models.PositiveBigIntegerField(default=0)
    acked_at = models.DateTimeField(null=True, blank=True)
    last_seen = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    # What a gateway says it runs in its acks (`python -m dataplane.agent`: "envoy" or
    # "nginx" and that proxy's version); null for gateways that do not say.
    engine = models.CharField(max_length=32, null=True, blank=True)
    engine_version = models.CharField(max_length=64, null=True, blank=True)
    skipped = models.JSONField(
        default=list,
        blank=True,
        help_text="Records of the acked generation the gateway runs without: "
        '[{"record", "reason"}].',
    )
    attempts = models.PositiveIntegerField(
        default=0, help_text="Failed delivery attempts since the last success."
    )
    last_attempt_at = models.DateTimeField(null=True, blank=True)
    fronts = models.JSONField(
        default=list,
        blank=True,
        help_text="Names of the services this gateway fronts: it may report metrics of "
        "those only, and only those count in release analysis. Empty: every service of "
        "the document it runs.",
    )
    refused_samples = models.PositiveBigIntegerField(
        default=0,
        help_text="Metric samples refused: services it does not front, or over METRICS_MAX_SERIES.",
    )
    # {service: samples} of the last batch with refusals, its largest few: a forged batch of
    # thousands of services must not grow the row.
    last_refused = models.JSONField(default=dict, blank=True)
    last_refused_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = GatewayQuerySet.as_manager()

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def delivered_by_us(self) -> bool:
        return self.mode in (self.PUSH, self.NACOS)

    @classmethod
    def stale(
        cls, mode: str, last_seen: datetime | None, created_at: datetime, now: datetime
    ) -> bool:
        """A pull gateway not seen for GATEWAY_STALE_SECONDS (from these fields: a poll
        answered from gateways/protocol/callers.py has no row)."""
        seen = last_seen or created_at
        return mode == cls.PULL and seen < now - timedelta(seconds=settings.GATEWAY_STALE_SECONDS)

    def status_at(self, current_generation: int, now: datetime) -> str:
        """`stale` (a pull gateway not seen for GATEWAY_STALE_SECONDS) before anything else,
        then `in_sync`, then `failing` (its last delivery errored), else `pending`."""
        if self.stale(self.mode, self.last_seen, self.created_at, now):
            return self.STALE
        if self.acked_generation >= current_generation:
            return self.IN_SYNC
        if self.last_error:
            return self.FAILING
        return self.PENDING


class Generation(models.Model):
    """One generation of the gateway document. A new one is made for every policy revision
    and every change of the routable instances; the newest is what gateways should run.
    Older rows keep their metadata (for "behind for how long") but not their content."""

    number = models.PositiveBigIntegerField(primary_key=True)
    revision = models.PositiveIntegerField()
    checksum = models.CharField(max_length=64)
    content = models.TextField(
        blank=True, help_text="The document as served (canonical JSON); newest generation only."
    )
    reason = models.CharField(max_length=255, blank=True)
    created_at = models.DateTimeField(db_index=True)

    class Meta:
        ordering = ["-number"]

    def __str__(self) -> str:
        return f"generation {self.number}"


class DocumentService(models.Model):
    """A service's stay in the gateway document: in every generation from `first_generation`
    up to, not including, `until_generation` (null: in the newest). The documents' content
    is not kept, so this is how the services of the generation a gateway acked are known
    (gateways/fronting.py: what it may report metrics of)."""

    name = models.CharField(max_length=255)
    first_generation = models.PositiveBigIntegerField()
    until_generation = models.PositiveBigIntegerField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["name"],
                condition=models.Q(until_generation__isnull=True),
                name="gateways_one_open_stay_per_service",
            )
        ]
        indexes = [models.Index(fields=["name", "first_generation"], name="gateways_stay_name")]

    def __str__(self) -> str:
        until = "" if self.until_generation is None else self.until_generation - 1
        return f"{self.name}: generations {self.first_generation}-{until}"
