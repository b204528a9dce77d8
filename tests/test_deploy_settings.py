"""Production settings from the environment (README: Configuration): with them, Django's
`check --deploy` is clean (`make lint` runs the same), and the settings refuse what would
be unsafe."""

import subprocess
import sys

import pytest

from testing.processes import BASE_DIR, django_env

pytestmark = pytest.mark.slow

PRODUCTION = {
    "DEBUG": "false",
    "SECRET_KEY": "a-production-like-key-0123456789-abcdefghijklmnopqrstuvwxyz",
    "ALLOWED_HOSTS": "graylane.example.org",
    "SECURE_PROXY_SSL_HEADER": "HTTP_X_FORWARDED_PROTO",
    "SECURE_SSL_REDIRECT": "true",
    "SECURE_HSTS_SECONDS": "31536000",
    "SECURE_HSTS_INCLUDE_SUBDOMAINS": "true",
    "SECURE_HSTS_PRELOAD": "true",
    "GRAYLANE_SECRET_KEYS": "Z3JheWxhbmUtZGVwbG95LWNoZWNrLW9ubHkta2V5LTA=",
}
PRODUCTION_KEY = PRODUCTION["GRAYLANE_SECRET_KEYS"]


CHECK_DEPLOY = ["manage.py", "check", "--deploy", "--fail-level", "WARNING"]


def run(tmp_path, args: list[str], **env: str) -> subprocess.CompletedProcess:
    environment = django_env(f"sqlite:///{tmp_path / 'db.sqlite3'}", **env)
    environment["GRAYLANE_VAR_DIR"] = str(tmp_path)
    return subprocess.run(
        [sys.executable, *args],
        cwd=BASE_DIR,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_check_deploy_is_clean_with_production_settings(tmp_path):
    done = run(tmp_path, CHECK_DEPLOY, **PRODUCTION)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "no issues" in done.stdout


def test_check_deploy_fails_without_them(tmp_path):
    # The same check on the defaults (plain http, for `make run` and the tests) does fail:
    # the test above is not passing for want of checks.
    defaults = {"DEBUG": "false", "SECRET_KEY": PRODUCTION["SECRET_KEY"]}
    done = run(tmp_path, CHECK_DEPLOY, **defaults)
    assert done.returncode != 0
    for warning in ("security.W004", "security.W008", "security.W012", "security.W016"):
        assert warning in done.stderr, warning


def settings_of(tmp_path, names: str, **env: str) -> list[str]:
    code = f"import django; django.setup(); from django.conf import settings as s; print({names})"
    done = run(tmp_path, ["-c", code], DJANGO_SETTINGS_MODULE="graylane.settings", **env)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


@pytest.mark.parametrize(
    "key",
    [
        "", "short-key",
        "x" * 60,  # long, but a repetition of one character
        "django-insecure-" + "0123456789abcdefghij" * 3,  # Django's generated dev key
    ],
)  # fmt: skip
def test_a_weak_secret_key_is_refused_when_debug_is_off(tmp_path, key):
    done = run(tmp_path, ["manage.py", "check"], DEBUG="false", SECRET_KEY=key)
    assert done.returncode != 0
    assert "manage.py: SECRET_KEY must be set when DEBUG is off, at least 50" in done.stderr


def test_debug_needs_no_secret_key(tmp_path):
    # `make run`.
    done = run(tmp_path, ["manage.py", "check"], DEBUG="true", SECRET_KEY="")
    assert done.returncode == 0, done.stderr


DEV_KEY = "Z3JheWxhbmUtaW5zZWN1cmUtZGV2LW9ubHkta2V5LTA="  # graylane/settings.py's


@pytest.mark.parametrize("keys", ["", " , ", DEV_KEY, f"{PRODUCTION_KEY},{DEV_KEY}"])
def test_production_needs_secret_keys_of_its_own(tmp_path, keys):
    done = run(tmp_path, ["manage.py", "check"], DEBUG="false", GRAYLANE_SECRET_KEYS=keys)
    assert done.returncode != 0
    assert "manage.py: GRAYLANE_SECRET_KEYS must be set when DEBUG is off" in done.stderr


def test_a_malformed_secret_key_is_refused_without_showing_it(tmp_path):
    keys = f"{PRODUCTION_KEY},not-a-fernet-key-but-maybe-a-password"
    done = run(tmp_path, ["manage.py", "check"], DEBUG="false", GRAYLANE_SECRET_KEYS=keys)
    assert done.returncode != 0
    assert "GRAYLANE_SECRET_KEYS: key 2 is not a Fernet key" in done.stderr
    assert "maybe-a-password" not in done.stderr


def test_debug_without_secret_keys_uses_the_development_key(tmp_path):
    # `make run` on a fresh machine: nothing set.
    names = "s.GRAYLANE_SECRET_KEYS"
    keys = settings_of(tmp_path, names, DEBUG="true", GRAYLANE_SECRET_KEYS="")
    assert keys == [repr([DEV_KEY])]


@pytest.mark.parametrize(
    "env,message",
    [
        ({"OUTBOUND_DENIED_NETWORKS": "169.254.0.0/16,10.0.0.0/33"}, "OUTBOUND_DENIED_NETWORKS: "
         "not an IP address or CIDR: '10.0.0.0/33'"),
        ({"OUTBOUND_ALLOWED_NETWORKS": "intranet"}, "OUTBOUND_ALLOWED_NETWORKS: not an IP "
         "address or CIDR: 'intranet'"),
        ({"OUTBOUND_ALLOWED_NETWORKS": "10.0.0.0/8", "PROMETHEUS_URL": "http://127.0.0.1:9090"},
         "127.0.0.1 is not in OUTBOUND_ALLOWED_NETWORKS: refused"),
    ],
)  # fmt: skip
def test_bad_outbound_networks_stop_start_up_naming_them(tmp_path, env, message):
    done = run(tmp_path, ["manage.py", "check"], **env)
    assert done.returncode != 0
    assert message in done.stderr


def test_outbound_networks_default_and_set(tmp_path):
    names = "s.OUTBOUND_POLICY.url_refusal('http://10.0.0.1/') is None, " + (
        "s.OUTBOUND_POLICY.url_refusal('http://169.254.169.254/') is None"
    )
    assert settings_of(tmp_path, names) == ["True", "False"]
    assert settings_of(tmp_path, names, OUTBOUND_DENIED_NETWORKS="10.0.0.0/8") == ["False", "True"]


def test_cookies_are_secure_once_https_is_declared(tmp_path):
    names = "s.SESSION_COOKIE_SECURE, s.CSRF_COOKIE_SECURE, s.SECURE_PROXY_SSL_HEADER"
    assert settings_of(tmp_path, names) == ["False", "False", "None"]  # plain http
    proxied = settings_of(tmp_path, names, SECURE_PROXY_SSL_HEADER="HTTP_X_FORWARDED_PROTO")
    assert proxied == ["True", "True", "('HTTP_X_FORWARDED_PROTO',", "'https')"]
    assert settings_of(tmp_path, names, SECURE_SSL_REDIRECT="true")[:2] == ["True", "True"]
    explicit = settings_of(
        tmp_path, names, SECURE_SSL_REDIRECT="true", SESSION_COOKIE_SECURE="false"
    )
    assert explicit[:2] == ["False", "True"]


@pytest.mark.parametrize(
    "env,message",
    [
        ({"METRICS_SOURCE": "graphite"}, "METRICS_SOURCE='graphite': use rollups or prometheus"),
        ({"PROMETHEUS_QUERIES": "{tmp}/queries.toml"}, "unknown placeholder {version}"),
        (
            {"PROMETHEUS_URL": "http://169.254.169.254:9090"},
            "PROMETHEUS_URL='http://169.254.169.254:9090': 169.254.169.254 is a cloud metadata "
            "address: refused (OUTBOUND_DENIED_NETWORKS)",
        ),
    ],
)
def test_a_bad_prometheus_source_stops_start_up_naming_it(tmp_path, env, message):
    (tmp_path / "queries.toml").write_text("requests = 'x{version}'\n")
    env = {name: value.format(tmp=tmp_path) for name, value in env.items()}
    env.setdefault("PROMETHEUS_URL", "http://127.0.0.1:9")
    done = run(tmp_path, ["manage.py", "check"], **env)
    assert done.returncode != 0
    assert message in done.stderr
