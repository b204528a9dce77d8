"""Settings for the test suite: the real settings, with the environment a test run needs
filled in when the caller did not set it (CI sets DATABASE_URL and REDIS_URL)."""

import os

os.environ.setdefault("SECRET_KEY", "test-only-secret-key-long-enough-for-django-checks-0123456789")
os.environ.setdefault("DEBUG", "false")
# base64 of "graylane-TEST-ONLY-fernet-key-00"; the servers the tests start inherit it.
os.environ.setdefault("GRAYLANE_SECRET_KEYS", "Z3JheWxhbmUtVEVTVC1PTkxZLWZlcm5ldC1rZXktMDA=")
os.environ.setdefault("ALLOWED_HOSTS", "127.0.0.1,localhost,testserver")
# Tests start what they need themselves; no background jobs inside the test process.
os.environ.setdefault("IN_PROCESS_JOBS", "false")
# A Redis prefix of the run's own: Redis' pub/sub (live events, gateway wake-ups) ignores the
# database number, so runs on one Redis server with the same prefix hear each other's events;
# each pytest-xdist worker has keys, channels and queues of its own too, and so do the servers
# and workers its tests start, which inherit the variable.
os.environ.setdefault("REDIS_PREFIX", f"graylane-test-{os.getpid()}")
if worker := os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ["REDIS_PREFIX"] = f"{os.environ['REDIS_PREFIX']}-{worker}"

from graylane.settings import *  # noqa: E402,F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
# django-axes needs the request in authenticate(), which the test client's login() does not
# pass; the tests of the lockout itself (accounts/tests/test_login_throttle.py) switch it on.
AXES_ENABLED = False
# Connections kept by worker threads would block dropping the test database.
DATABASES["default"]["CONN_MAX_AGE"] = 0  # noqa: F405
# Nor a pool here: the test run creates and drops the test database under the same alias.
# (The servers and workers the tests start use the real settings, pool included.)
DATABASES["default"]["OPTIONS"].pop("pool", None)  # noqa: F405

if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":  # noqa: F405
    # A file, not shared-cache memory: threads of the concurrency and browser tests then
    # wait on SQLite's lock (timeout above) instead of failing with "table is locked".
    # One file per run, so two runs on one machine do not share it.
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / f"test-{os.getpid()}.sqlite3")}  # noqa: F405
