"""Test-wide environment, set before Django settings load."""

import os

os.environ.setdefault("SECRET_KEY", "test-only-secret-key")
os.environ.setdefault("DEBUG", "false")
os.environ.setdefault("ALLOWED_HOSTS", "127.0.0.1,localhost,testserver")
# Tests start what they need themselves; no background jobs inside the test process.
os.environ.setdefault("IN_PROCESS_JOBS", "false")
