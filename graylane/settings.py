"""Graylane settings: everything comes from the environment, with defaults that work on a
fresh checkout (SQLite file under var/, no Redis, background jobs inside the web process).
README.md lists every variable."""

from datetime import timedelta
from pathlib import Path

import dj_database_url
from cryptography.fernet import Fernet
from django.core.exceptions import ImproperlyConfigured

import outbound
from graylane.env import env_bool, env_float, env_int, env_list, env_str
from routing_engine import parse_networks

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(env_str("GRAYLANE_VAR_DIR", str(BASE_DIR / "var")))
VAR_DIR.mkdir(parents=True, exist_ok=True)

DEBUG = env_bool("DEBUG", False)
SECRET_KEY = env_str("SECRET_KEY")
# What Django's `check --deploy` asks of a key (security.W009): signatures made with a
# short or repetitive key can be forged.
MIN_SECRET_KEY_LENGTH = 50
if not DEBUG and (
    len(SECRET_KEY) < MIN_SECRET_KEY_LENGTH
    or len(set(SECRET_KEY)) < 5
    or SECRET_KEY.startswith("django-insecure-")
):
    raise ImproperlyConfigured(
        f"SECRET_KEY must be set when DEBUG is off, at least {MIN_SECRET_KEY_LENGTH} "
        "characters and not a repetition of a few (it signs sessions and CSRF tokens). "
        "Generate one with: python -c 'import secrets; print(secrets.token_urlsafe(50))'"
    )
if not SECRET_KEY:
    SECRET_KEY = "insecure-dev-only-key-debug-is-on"

# Secrets kept at rest (accounts/secret_fields.py): Fernet keys, the first encrypts, every one
# decrypts (README: Secrets at rest, rotation). With DEBUG (`make run`) and none set, a
# published key: base64 of "graylane-insecure-dev-only-key-0".
DEV_SECRET_KEYS = ["Z3JheWxhbmUtaW5zZWN1cmUtZGV2LW9ubHkta2V5LTA="]


def _secret_keys() -> list[str]:
    keys = env_list("GRAYLANE_SECRET_KEYS", [])
    if DEBUG and not keys:
        return DEV_SECRET_KEYS
    if not keys or set(keys) & set(DEV_SECRET_KEYS):
        raise ImproperlyConfigured(
            "GRAYLANE_SECRET_KEYS must be set when DEBUG is off, and not to the published "
            "development key (it encrypts the stored push secrets and passwords). Generate a "
            "key with: python -c 'from cryptography.fernet import Fernet; "
            "print(Fernet.generate_key().decode())'"
        )
    for position, key in enumerate(keys, start=1):
        try:
            Fernet(key)
        except ValueError:
            raise ImproperlyConfigured(
                f"GRAYLANE_SECRET_KEYS: key {position} is not a Fernet key (32 url-safe "
                "base64-encoded bytes, as Fernet.generate_key() makes)."
            ) from None
    return keys


GRAYLANE_SECRET_KEYS = _secret_keys()

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

# HTTPS (README: Configuration). Off by default, so `make run`, the tests and a LAN install
# work on plain http. Behind a TLS proxy, SECURE_PROXY_SSL_HEADER names the header it sets
# (e.g. HTTP_X_FORWARDED_PROTO, meaning "X-Forwarded-Proto: https"); the proxy must set or
# strip it on every request. Once HTTPS is declared either way, cookies default to Secure.
_proxy_ssl_header = env_str("SECURE_PROXY_SSL_HEADER")
SECURE_PROXY_SSL_HEADER = (_proxy_ssl_header, "https") if _proxy_ssl_header else None
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", False)
_https = SECURE_SSL_REDIRECT or SECURE_PROXY_SSL_HEADER is not None
SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", _https)
CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", _https)
# HSTS commits browsers to HTTPS for this long, so it is never on unless asked for.
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", False)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", False)
# SecurityMiddleware's other headers keep Django's defaults: X-Content-Type-Options:
# nosniff, Referrer-Policy: same-origin, Cross-Origin-Opener-Policy: same-origin.
X_FRAME_OPTIONS = "DENY"
# django-csp: no inline script or style anywhere (templates use static files; JSON data
# islands are type="application/json", which is not script). The live websocket is 'self'.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "img-src": ["'self'", "data:"],
        "connect-src": ["'self'"],
        "font-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'self'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
    }
}

# Request bodies: Django refuses larger ones (DATA_UPLOAD_MAX_MEMORY_SIZE; default 2.5 MiB,
# room for a policy with 100,000 users) and graylane.request_guard answers 413 before
# anything reads or authenticates; the gateway endpoints take at most
# GATEWAY_MAX_BODY_BYTES, on the ASGI path (gateways/protocol/asgi.py) too.
DATA_UPLOAD_MAX_MEMORY_SIZE = env_int("DATA_UPLOAD_MAX_MEMORY_SIZE", 2_621_440, minimum=1)
GATEWAY_MAX_BODY_BYTES = env_int("GATEWAY_MAX_BODY_BYTES", 65_536, minimum=1)

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "channels",
    "axes",
    "audit",
    "accounts",
    "policy",
    "registry_sync",
    "embedded_registry",
    "dashboard",
    "demo",
    "gateways",
    "metrics",
    "call_graph",
    "releases",
    "traffic",
    "graylane.apps.GraylaneConfig",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # Header-only middleware first, so the refusals of request_guard carry their headers.
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "csp.middleware.CSPMiddleware",
    "graylane.request_guard.RequestGuardMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "axes.middleware.AxesMiddleware",
    # Last, so that it sees what the view raised first, and watches only what the view runs.
    "graylane.outages.OutageMiddleware",
]

ROOT_URLCONF = "graylane.urls"
ASGI_APPLICATION = "graylane.asgi.application"
WSGI_APPLICATION = "graylane.wsgi.application"
# Threads running Django's HTTP requests under the ASGI server (graylane/wsgi_in_asgi.py).
WEB_THREADS = env_int("WEB_THREADS", 16, minimum=1)

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "dashboard.context_processors.navigation",
                "gateways.context_processors.gateways_behind",
            ],
        },
    },
]

DATABASE_URL = env_str("DATABASE_URL")
if not DATABASE_URL:
    DATABASE_URL = f"sqlite:///{VAR_DIR / 'graylane.sqlite3'}"
# Opening a connection per request and per task was a third of the server's CPU when 50
# gateways ack at once; keep them, and check them before reuse.
DATABASES = {
    "default": dj_database_url.parse(
        DATABASE_URL,
        conn_max_age=env_int("DB_CONN_MAX_AGE", 60),
        conn_health_checks=True,
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    # Requests (graylane/wsgi_in_asgi.py), batched gateway calls, jobs and the live status
    # run in threads of their own; a connection kept by each thread would mostly sit idle
    # (and opening one costs ~10 ms here). A pool hands connections from thread to thread.
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    DATABASES["default"]["OPTIONS"] = {
        "pool": {"min_size": 2, "max_size": env_int("DB_POOL_SIZE", 20, minimum=1), "timeout": 10}
    }
# Django's own SQLite backend: concurrent writers wait for the lock (busy timeout,
# seconds) instead of failing at once; IMMEDIATE: a transaction takes the write lock when it
# begins, so it never fails half-way trying to upgrade a read lock. WAL: readers do not
# wait for the writer, and a commit costs no full fsync.
SQLITE_OPTIONS = {
    "timeout": 20,
    "transaction_mode": "IMMEDIATE",
    "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    DATABASES["default"]["OPTIONS"] = dict(SQLITE_OPTIONS)
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
# django-axes: after AXES_FAILURE_LIMIT failed logins for one username from one address,
# that pair is locked out for AXES_COOLOFF_MINUTES (the login page says so; 429). It
# watches Django's authenticate(), so every login form and API login using it is covered.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = env_int("AXES_FAILURE_LIMIT", 5, minimum=1)
AXES_COOLOFF_TIME = timedelta(minutes=env_float("AXES_COOLOFF_MINUTES", 15.0, minimum=0.1))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_CALLABLE = "accounts.lockout.lockout_response"
LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/accounts/login/"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "/static/"
STATIC_ROOT = VAR_DIR / "static"
STATIC_ROOT.mkdir(exist_ok=True)
STATICFILES_DIRS = [BASE_DIR / "static"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
WHITENOISE_USE_FINDERS = True

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "accounts.authentication.ApiTokenAuthentication",
        "gateways.authentication.GatewayTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["accounts.permissions.RolePermission"],
    "DEFAULT_PAGINATION_CLASS": "graylane.pagination.Pagination",
    "PAGE_SIZE": 50,
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "graylane.api_errors.exception_handler",
    "DEFAULT_PARSER_CLASSES": [
        "graylane.parsers.JSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Graylane API",
    "DESCRIPTION": "Canary release control plane: gray policy, versions, instances, gateways.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    # Deep links put a link inside each operation's expand button (nested controls a screen
    # reader cannot tell apart); they only made an opened operation's URL shareable.
    "SWAGGER_UI_SETTINGS": {"deepLinking": False},
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    # Gateway tokens open only the gateway endpoints, which declare that themselves.
    "AUTHENTICATION_WHITELIST": [
        "accounts.authentication.ApiTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
    ],
    # Several models have a `state`: each choice set gets its own name.
    "ENUM_NAME_OVERRIDES": {"PolicyDraftStateEnum": "policy.models.DRAFT_STATES"},
}

REDIS_PREFIX = env_str("REDIS_PREFIX", "graylane")
# Redis is optional: without it the channel layer lives in memory and Celery runs on an
# in-memory broker inside the web process, so events from jobs still reach browsers.
REDIS_URL = env_str("REDIS_URL")
if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
            "CONFIG": {"hosts": [REDIS_URL], "prefix": REDIS_PREFIX},
        }
    }
    CELERY_BROKER_URL = REDIS_URL
    # Shared by replicas: what one checked (embedded_registry's credentials), all know.
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": REDIS_URL,
            "KEY_PREFIX": REDIS_PREFIX,
        }
    }
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "events.channel_layers.InProcessChannelLayer"}}
    CELERY_BROKER_URL = ""
    # kombu's in-memory transport (this process only), woken instead of polled.
    CELERY_BROKER_TRANSPORT = "graylane.memory_broker:Transport"
# The Celery worker and beat as threads of the web process (graylane/background.py): only
# without Redis, where the in-memory layer reaches no other process (graylane.E002).
IN_PROCESS_JOBS = env_bool("IN_PROCESS_JOBS", not REDIS_URL)
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_TIME_LIMIT = 300
CELERY_TASK_SOFT_TIME_LIMIT = 240
# Celery's Django fixup closes a worker thread's database connections around every task
# unless told how many tasks may reuse them; graylane/celery.py then looks after them as
# Django does around requests (CONN_MAX_AGE, health checks), and closes them after a task
# that did not succeed. (A new SQLite connection per delivery cost 1.4 ms of CPU on every
# publish's path, on top of the 0.35 ms of its first query.)
CELERY_DB_REUSE_MAX = 1000
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
# kombu's Redis transport gives a task back to the queue when the worker that took it
# (acks_late) died without acknowledging it. Workers look for such tasks in turn, under a Redis
# lock; a worker killed while it holds the lock leaves it to expire, and until then no worker
# gives anything back: 300 s by default. A look takes milliseconds, and two at once do no
# harm (each task is given back by one Redis transaction, which only one of them can make),
# so the lock needs to outlive a look only: CELERY_UNACKED_MUTEX_EXPIRE seconds.
CELERY_BROKER_TRANSPORT_OPTIONS: dict[str, str | float] = {
    "global_keyprefix": REDIS_PREFIX + ":",
    "unacked_mutex_expire": env_int("CELERY_UNACKED_MUTEX_EXPIRE", 10, minimum=1),
}

DRAIN_SECONDS = env_float("DRAIN_SECONDS", 5.0)
# "Restart instance" on the service page, for the demo fleet (demo/restart.py).
DEMO_RESTART = env_bool("DEMO_RESTART", False)

# Releases: an approval step wants an operator other than the release's creator.
RELEASE_FOUR_EYES = env_bool("RELEASE_FOUR_EYES", False)
# The dashboard's address as people reach it: webhook messages link to a release's page.
PUBLIC_URL = env_str("PUBLIC_URL").rstrip("/")

# Gateway config delivery (gateways/).
GATEWAY_STALE_SECONDS = env_float("GATEWAY_STALE_SECONDS", 30.0, minimum=1.0)
GATEWAY_BEHIND_BANNER_SECONDS = env_float("GATEWAY_BEHIND_BANNER_SECONDS", 30.0)
GATEWAY_PUSH_TIMEOUT = env_float("GATEWAY_PUSH_TIMEOUT", 5.0, minimum=0.1)
GATEWAY_PUSH_CONCURRENCY = env_int("GATEWAY_PUSH_CONCURRENCY", 32, minimum=1)
GATEWAY_RETRY_MAX_DELAY = env_float("GATEWAY_RETRY_MAX_DELAY", 30.0, minimum=1.0)
GATEWAY_WAKEUP_CHANNEL = REDIS_PREFIX + ":gateways:generation"
# A gateway changed or deleted: processes forget its remembered identity (protocol/callers.py).
GATEWAY_CHANGED_CHANNEL = REDIS_PREFIX + ":gateways:changed"
GATEWAY_SWEEP_SECONDS = max(1.0, GATEWAY_STALE_SECONDS / 3)

# Convergence-gated release steps (releases/convergence.py): the share of the gateways
# fronting a service that must ack a step's generation before its analysis starts, and how
# long a step may wait for them before its release pauses.
RELEASE_CONVERGENCE_SHARE = env_float("RELEASE_CONVERGENCE_SHARE", 1.0)
if RELEASE_CONVERGENCE_SHARE > 1:
    raise ImproperlyConfigured(
        f"RELEASE_CONVERGENCE_SHARE={RELEASE_CONVERGENCE_SHARE}: a share, at most 1."
    )
RELEASE_CONVERGENCE_TIMEOUT = env_float("RELEASE_CONVERGENCE_TIMEOUT", 60.0, minimum=1.0)

# Who a caller is (routing_engine.caller), for the simulator as for the gateway: a GeoIP2 or
# GeoLite2 City database for callers' cities, and the proxies whose X-Forwarded-For and
# city header are believed.
GEOIP_DATABASE = env_str("GEOIP_DATABASE")
if GEOIP_DATABASE and not Path(GEOIP_DATABASE).is_file():
    raise ImproperlyConfigured(f"GEOIP_DATABASE={GEOIP_DATABASE!r} is not a file.")
TRUSTED_PROXIES = env_list("TRUSTED_PROXIES", [])
try:
    parse_networks(TRUSTED_PROXIES)
except ValueError as exc:
    raise ImproperlyConfigured(f"TRUSTED_PROXIES: {exc}") from exc


# Where registries, webhooks, Prometheus and Nacos config servers may be (outbound/policy.py):
# checked when an address is saved and again at every connection.
def _networks(name: str, default: tuple[str, ...]) -> list[str]:
    value = env_list(name, list(default))
    try:
        parse_networks(value)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name}: {exc}") from None
    return value


OUTBOUND_ALLOWED_NETWORKS = _networks("OUTBOUND_ALLOWED_NETWORKS", outbound.DEFAULT_ALLOWED)
OUTBOUND_DENIED_NETWORKS = _networks("OUTBOUND_DENIED_NETWORKS", outbound.DEFAULT_DENIED)
OUTBOUND_POLICY = outbound.Policy(OUTBOUND_ALLOWED_NETWORKS, OUTBOUND_DENIED_NETWORKS)

REGISTRY_TIMEOUT = env_float("REGISTRY_TIMEOUT", 3.0, minimum=0.1)
# The embedded registry's naming API (/nacos/v1/ns/...) wants Nacos credentials: an
# accessToken from /nacos/v1/auth/login, valid this many seconds, or a `service` API token.
# Off: requests from loopback need none (everyone else still does).
EMBEDDED_REGISTRY_AUTH = env_bool("EMBEDDED_REGISTRY_AUTH", True)
EMBEDDED_REGISTRY_TOKEN_TTL = env_int("EMBEDDED_REGISTRY_TOKEN_TTL", 18000, minimum=1)
# Clients that send username + password on every call (no accessToken): how long a
# successful check is remembered (a password change ends it at once); 0 checks every call.
EMBEDDED_REGISTRY_PASSWORD_CACHE_SECONDS = env_int(
    "EMBEDDED_REGISTRY_PASSWORD_CACHE_SECONDS", 60, minimum=0
)
# Nacos 2.x gRPC naming (embedded_registry/nacos_grpc/): on this port; 0 (unset) is the HTTP
# port + 1000, the one Nacos 2.x clients derive from the server address they are given.
EMBEDDED_REGISTRY_GRPC_PORT = env_int("EMBEDDED_REGISTRY_GRPC_PORT", 0, minimum=0)
# Release metrics (metrics/): what gateways report, live and per minute.
METRICS_RETENTION_DAYS = env_float("METRICS_RETENTION_DAYS", 14.0, minimum=0.01)
METRICS_MAX_AGE_SECONDS = env_int("METRICS_MAX_AGE_SECONDS", 600, minimum=10)
METRICS_MAX_SAMPLES = env_int("METRICS_MAX_SAMPLES", 1000, minimum=1)
METRICS_MAX_BODY_BYTES = env_int("METRICS_MAX_BODY_BYTES", 262_144, minimum=1)
# Series (service, version) with samples in the live windows at once; a sample that would
# start one more is refused, so what gateways send cannot grow memory, /metrics or the page.
METRICS_MAX_SERIES = env_int("METRICS_MAX_SERIES", 10_000, minimum=1)
# /metrics (Prometheus): open when empty, else `Authorization: Bearer <METRICS_TOKEN>`.
METRICS_TOKEN = env_str("METRICS_TOKEN")
# Call edges the services report (GET /api/v1/call-edges/): one row per edge and minute, kept
# this long.
CALL_EDGES_RETENTION_DAYS = env_float("CALL_EDGES_RETENTION_DAYS", 7.0, minimum=0.01)
# The series API's other source: Prometheus, through PromQL templates (metrics/promql_source.py).
PROMETHEUS_URL = env_str("PROMETHEUS_URL")
PROMETHEUS_TIMEOUT = env_float("PROMETHEUS_TIMEOUT", 5.0, minimum=0.1)
PROMETHEUS_QUERIES = env_str("PROMETHEUS_QUERIES")
METRICS_SOURCE = env_str("METRICS_SOURCE", "rollups")
if METRICS_SOURCE not in ("rollups", "prometheus"):
    raise ImproperlyConfigured(f"METRICS_SOURCE={METRICS_SOURCE!r}: use rollups or prometheus.")
if _refusal := OUTBOUND_POLICY.url_refusal(PROMETHEUS_URL):
    raise ImproperlyConfigured(f"PROMETHEUS_URL={PROMETHEUS_URL!r}: {_refusal}")
# Sampled requests (traffic/): what gateways send for previews and replays. Personal data
# (client IP, user): kept for TRAFFIC_SAMPLES_WINDOW_S at most, in Redis when REDIS_URL is
# set (shared by replicas), else in this process; never in the database.
TRAFFIC_SAMPLES = env_bool("TRAFFIC_SAMPLES", True)
TRAFFIC_SAMPLES_WINDOW_S = env_int("TRAFFIC_SAMPLES_WINDOW_S", 900, minimum=1)
TRAFFIC_SAMPLES_MAX = env_int("TRAFFIC_SAMPLES_MAX", 1_000_000, minimum=1)
TRAFFIC_SAMPLES_PER_SERVICE = env_int("TRAFFIC_SAMPLES_PER_SERVICE", 200_000, minimum=1)
# Events one /ws/live/ socket may have waiting before it is dropped as too slow.
LIVE_CLIENT_QUEUE = env_int("LIVE_CLIENT_QUEUE", 256, minimum=1)

CELERY_BEAT_SCHEDULE = {
    "sync-due-registries": {
        "task": "registry_sync.tasks.sync_due_registries",
        "schedule": 1.0,
        # A backlog of dispatcher runs is useless: each run looks at the clock anew.
        "options": {"expires": 1.0},
    },
    "gateways-sweep": {"task": "gateways.tasks.sweep", "schedule": GATEWAY_SWEEP_SECONDS},
    # Live figures once a second: tried twice a second, sent once per second (a beat
    # interval drifts late); a late run is worthless, the next one reads anew.
    "metrics-publish-live": {
        "task": "metrics.tasks.publish_live",
        "schedule": 0.5,
        "options": {"expires": 0.5},
    },
    "metrics-prune": {"task": "metrics.tasks.prune", "schedule": 3600.0},
    "call-graph-prune": {"task": "call_graph.tasks.prune", "schedule": 3600.0},
    # Each release's interval is checked every second; a late run is worthless, the next
    # one looks anew.
    "releases-analyse": {
        "task": "releases.tasks.analyse_due",
        "schedule": 1.0,
        "options": {"expires": 1.0},
    },
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
    "loggers": {
        "django.channels.server": {"level": "WARNING"},
        "httpx": {"level": "WARNING"},
        # One line per task and per beat tick every second drowns everything else.
        "celery.app.trace": {"level": "WARNING"},
        "celery.worker.strategy": {"level": "WARNING"},
        "celery.beat": {"level": "WARNING"},
        "axes.apps": {"level": "WARNING"},  # its version, at every start
    },
}
