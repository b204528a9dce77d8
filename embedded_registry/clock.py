"""The time the embedded registry goes by: instances' heartbeats against their timeouts, and
the timestamps of its accessTokens. Read as `clock.now()` at each use, so a test can stand
it still and move it on (testing/clock.py) instead of sleeping past a timeout."""

from collections.abc import Callable
from datetime import datetime

from django.utils import timezone

now: Callable[[], datetime] = timezone.now
