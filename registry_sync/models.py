import re
from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models

from accounts.roles import ADMIN, has_role
from accounts.secret_fields import MAX_PASSWORD_LENGTH, EncryptedTextField
from registry_sync.adapters import DEFAULT_VERSION_LABEL
from registry_sync.adapters.consul import DATACENTER
from routing_engine.records import version_problem

CREDENTIALS_IN_URL = "No credentials in the URL: put them in username/password."
UNREACHABLE = "unreachable (admins see why)"
MAX_TOKEN_LENGTH = 8192  # a service-account JWT is 1-2 KB; OIDC ones can be larger
# Kubernetes names: a namespace is a DNS label; a label key an optional DNS-subdomain prefix
# and a name (https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/).
K8S_NAMESPACE = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?\Z")
K8S_LABEL_KEY = re.compile(
    r"([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?\Z"
)
# Consul's own rule for Meta keys: letters, digits, _ and - (it allows 128; the column, 64).
METADATA_KEY = re.compile(r"[A-Za-z0-9_-]{1,64}\Z")


def validate_default_version(value: str) -> None:
    problem = version_problem(value)
    if value and problem:
        raise ValidationError(f"Not a version: {problem}.")


def validate_version_label(value: str) -> None:
    prefix = value.rpartition("/")[0]
    if not K8S_LABEL_KEY.match(value) or len(prefix) > 253:
        raise ValidationError(
            "Not a Kubernetes label key: an optional DNS-subdomain prefix and '/', then 1-63 "
            "letters, digits, '-', '_' or '.', starting and ending with a letter or digit."
        )


def kubernetes_problems(
    *, base_url: str, namespace: str, token: str, kubeconfig: str
) -> dict[str, str]:
    """What is wrong with a Kubernetes registry's settings, by field (empty: nothing). The
    admin form and the API both ask."""
    problems = {}
    names = [name.strip() for name in namespace.split(",")]
    if not all(K8S_NAMESPACE.match(name) for name in names):
        problems["namespace"] = (
            "One or more Kubernetes namespaces, comma-separated: each 1-63 lower-case "
            "letters, digits and '-', starting and ending with a letter or digit."
        )
    if token and not base_url:
        problems["base_url"] = "Required with a token: the API server's URL."
    if token and kubeconfig:
        problems["kubeconfig"] = "Either a token or a kubeconfig, not both."
    if kubeconfig and not kubeconfig.startswith("/"):
        problems["kubeconfig"] = "An absolute path on the Graylane host."
    return problems


def validate_datacenter(value: str) -> None:
    if value and not DATACENTER.match(value):
        raise ValidationError("Letters, digits, - and _ only (at most 64).")


def validate_version_key(value: str) -> None:
    if not METADATA_KEY.match(value):
        raise ValidationError("1-64 letters, digits, _ and - (a Consul Meta key).")


def url_has_credentials(url: str) -> bool:
    """`http://user:pass@host/`: a password there would be shown wherever the URL is."""
    try:
        return "@" in urlsplit(url).netloc
    except ValueError:
        return False  # not a URL: the URL validation says so


class Registry(models.Model):
    EMBEDDED, NACOS, EUREKA, KUBERNETES, CONSUL = (
        "embedded",
        "nacos",
        "eureka",
        "kubernetes",
        "consul",
    )
    KINDS = [
        (EMBEDDED, "Embedded (Nacos 1.x API served by Graylane)"),
        (NACOS, "Nacos"),
        (EUREKA, "Eureka"),
        (KUBERNETES, "Kubernetes (EndpointSlices)"),
        (CONSUL, "Consul"),
    ]
    API_VERSIONS = [
        ("auto", "Detect"),
        ("v1", "Nacos 1.x / 2.x (v1 API)"),
        ("v3", "Nacos 3.x (v3 API)"),
    ]

    name = models.SlugField(max_length=64, unique=True)
    kind = models.CharField(max_length=10, choices=KINDS, default=EMBEDDED)
    base_url = models.URLField(
        blank=True,
        help_text="e.g. http://127.0.0.1:8848/nacos, http://127.0.0.1:8761/eureka, a Consul "
        "agent's address (http://127.0.0.1:8500); Kubernetes: the API server (empty: the "
        "kubeconfig's, else the cluster Graylane runs in)",
    )
    namespace = models.CharField(
        max_length=128,
        default="public",
        blank=True,
        help_text="Kubernetes: the namespaces to read, comma-separated.",
    )
    group = models.CharField(max_length=128, default="DEFAULT_GROUP", blank=True)
    api_version = models.CharField(max_length=4, choices=API_VERSIONS, default="auto")
    username = models.CharField(max_length=128, blank=True)
    password = EncryptedTextField(max_length=MAX_PASSWORD_LENGTH, blank=True)
    version_label = models.CharField(
        max_length=317,  # a 253-character prefix, '/', a 63-character name
        default=DEFAULT_VERSION_LABEL,
        blank=True,
        validators=[validate_version_label],
        help_text=f"Kubernetes: the Pod label that holds the version (empty: "
        f"{DEFAULT_VERSION_LABEL}).",
    )
    token = EncryptedTextField(
        max_length=MAX_TOKEN_LENGTH,
        blank=True,
        help_text="Kubernetes: a bearer (service-account) token for the API server. Consul: "
        "the ACL token.",
    )
    kubeconfig = models.CharField(
        max_length=1024,
        blank=True,
        help_text="Kubernetes, without a token: the path of a kubeconfig file on the Graylane "
        "host (its current context). Neither: the service account Graylane runs as.",
    )
    # Consul's (registry_sync/adapters/consul.py).
    datacenter = models.CharField(
        max_length=64,
        blank=True,
        validators=[validate_datacenter],
        help_text="Consul: the datacenter to read (empty: the agent's own).",
    )
    version_key = models.CharField(
        max_length=64,
        default="version",
        blank=True,
        validators=[validate_version_key],
        help_text="Consul: the Service.Meta key holding an instance's version (empty: version).",
    )
    default_version = models.CharField(
        max_length=64,
        blank=True,
        validators=[validate_default_version],
        help_text="The version of an instance whose metadata has no usable `version` "
        "(empty: none; such an instance takes ALL traffic only, never PROD or GRAY).",
    )
    sync_interval = models.FloatField(default=5.0, help_text="Seconds between syncs.")
    enabled = models.BooleanField(default=True)
    stale = models.BooleanField(default=False, help_text="The last sync failed.")
    last_error = models.TextField(
        blank=True, help_text="Why the last sync failed, or which instances it skipped."
    )
    skipped_instances = models.PositiveIntegerField(
        default=0, help_text="Instances the last good sync skipped as invalid (see last error)."
    )
    last_sync_at = models.DateTimeField(null=True, blank=True)
    last_success_at = models.DateTimeField(null=True, blank=True)
    lease_until = models.DateTimeField(
        null=True, blank=True, editable=False, help_text="A sync holds the registry until then."
    )

    class Meta:
        ordering = ["name"]
        verbose_name_plural = "registries"

    def __str__(self) -> str:
        return self.name

    def last_error_for(self, user) -> str:
        """What `user` may see of `last_error`. Why a sync failed can tell what is at an
        internal address (refused or timed out: whether a port is open; an HTTP error: what
        the server there answered), so only admins and staff see it; everyone else, that
        the registry is unreachable. What a good sync skipped, all see."""
        if self.stale and self.last_error and not (user.is_staff or has_role(user, ADMIN)):
            return UNREACHABLE
        return self.last_error

    def clean(self):
        super().clean()
        if url_has_credentials(self.base_url):
            raise ValidationError({"base_url": CREDENTIALS_IN_URL})
        if refusal := settings.OUTBOUND_POLICY.url_refusal(self.base_url):
            raise ValidationError({"base_url": refusal})
        if self.kind == self.KUBERNETES and (
            problems := kubernetes_problems(
                base_url=self.base_url,
                namespace=self.namespace,
                token=self.token,
                kubeconfig=self.kubeconfig,
            )
        ):
            raise ValidationError(problems)


class Service(models.Model):
    registry = models.ForeignKey(
        Registry, null=True, blank=True, on_delete=models.SET_NULL, related_name="services"
    )
    name = models.CharField(max_length=255, unique=True)
    group = models.CharField(max_length=128, default="DEFAULT_GROUP", blank=True)
    first_seen = models.DateTimeField(auto_now_add=True)
    # A change of its routing waits as a draft for another operator (policy/drafts.py).
    protected = models.BooleanField(default=False)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Instance(models.Model):
    STARTING, UP, UNHEALTHY, DRAINING, OFFLINE, DOWN = (
        "STARTING",
        "UP",
        "UNHEALTHY",
        "DRAINING",
        "OFFLINE",
        "DOWN",
    )
    STATES = [(s, s) for s in (STARTING, UP, UNHEALTHY, DRAINING, OFFLINE, DOWN)]

    service = models.ForeignKey(Service, on_delete=models.CASCADE, related_name="instances")
    instance_id = models.CharField(max_length=255)
    cluster = models.CharField(max_length=64, default="DEFAULT")
    host = models.CharField(max_length=255)
    port = models.PositiveIntegerField()
    # From metadata key `version` (else the registry's default_version); null: none, so
    # it takes ALL traffic only (routing_engine.records).
    version = models.CharField(max_length=64, null=True, blank=True)
    state = models.CharField(max_length=10, choices=STATES, default=UP, db_index=True)
    healthy = models.BooleanField(default=True)
    enabled = models.BooleanField(default=True)
    weight = models.FloatField(default=1.0)
    metadata = models.JSONField(default=dict, blank=True)
    last_seen = models.DateTimeField(null=True, blank=True)
    offline_intent = models.BooleanField(
        default=False, help_text="An operator took it out of traffic; sync keeps it out."
    )
    drain_until = models.DateTimeField(null=True, blank=True)
    note = models.CharField(max_length=255, blank=True)

    class Meta:
        ordering = ["service__name", "host", "port"]
        constraints = [
            models.UniqueConstraint(fields=["service", "instance_id"], name="unique_instance")
        ]

    def __str__(self) -> str:
        return f"{self.service.name} {self.host}:{self.port}"


class LifecycleEvent(models.Model):
    """One step of an instance's start or shutdown, as the instance (service SDK) or a gateway
    reported it (POST /api/v1/lifecycle/). Kept by service name and address rather than by
    Instance row: an instance reports `starting` before it is registered, so before any sync
    has made its row, and its events outlive the row's changes."""

    EVENTS = ("starting", "warmed_up", "registered", "serving", "draining", "drained", "exited")
    EVENT_CHOICES = [(event, event) for event in EVENTS]

    service = models.CharField(max_length=255)
    host = models.CharField(max_length=255)
    port = models.PositiveIntegerField()
    event = models.CharField(max_length=16, choices=EVENT_CHOICES)
    at = models.DateTimeField(help_text="When it happened, by the reporter's clock.")
    received_at = models.DateTimeField(auto_now_add=True)
    detail = models.JSONField(default=dict, blank=True)
    reporter = models.CharField(max_length=255, blank=True, help_text="Who reported it.")

    class Meta:
        ordering = ["-at", "-id"]
        indexes = [models.Index(fields=["service", "at"])]

    def __str__(self) -> str:
        return f"{self.service} {self.host}:{self.port} {self.event}"
