import copy

import pytest

from routing_engine import DEFAULT_POLICY, normalize_policy


@pytest.fixture
def policy():
    """Build a normalised policy from DEFAULT_POLICY plus overrides."""

    def build(**overrides):
        return normalize_policy({**copy.deepcopy(DEFAULT_POLICY), **overrides})

    return build
