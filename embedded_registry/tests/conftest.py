import pytest

from embedded_registry import clock
from testing.clock import SteppedClock


@pytest.fixture
def registry_clock(monkeypatch):
    """The embedded registry's clock, standing still until the test advances it."""
    stepped = SteppedClock()
    monkeypatch.setattr(clock, "now", stepped.now)
    return stepped
