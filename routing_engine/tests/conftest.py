import copy

import pytest

from routing_engine import DEFAULT_POLICY, matcher, normalize_policy
from testing.speedups import compiled_or_skip


@pytest.fixture
def policy():
    """Build a normalised policy from DEFAULT_POLICY plus overrides."""

    def build(**overrides):
        return normalize_policy({**copy.deepcopy(DEFAULT_POLICY), **overrides})

    return build


@pytest.fixture(params=["compiled", "pure"])
def engine(request, monkeypatch):
    """Each test using it runs on both implementations of the engine's hot primitives: the C
    ones (routing_engine/_speedups.c, built by `make install`) and the pure Python fallback."""
    compiled = compiled_or_skip() if request.param == "compiled" else None
    monkeypatch.setattr(matcher, "speedups", compiled)
    return request.param
