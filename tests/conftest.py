"""Fixtures of the tests in tests/: the dashboard under test and gateways, as the gateway
protocol's own tests make them, and the gateway tests' lab (the agent's, the Prometheus
source's and the releases' end-to-end tests share it; a module that overrides `server`
gives the lab its own dashboard)."""

import pytest

from gateways.tests.conftest import make_gateway, server  # noqa: F401
from testing.gateway_lab import Lab, UpstreamFleet
from tests.test_gateway_routing import SEED_RULES


@pytest.fixture
def lab(server, make_user, make_gateway, tmp_path):  # noqa: F811 (fixtures by name)
    with UpstreamFleet() as fleet:
        lab = Lab(server, fleet, make_user, make_gateway, tmp_path)
        try:
            yield lab
        finally:
            lab.stop()


@pytest.fixture
def two_versions(lab):
    """user-app at V1 and V2, one instance each, routable, and the seed's header rule."""
    v1, v2 = lab.instance("user-app", "V1"), lab.instance("user-app", "V2")
    lab.sync()
    lab.policy(**SEED_RULES)
    return v1, v2
