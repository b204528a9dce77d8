"""Fixtures of the tests in tests/: the dashboard under test and gateways, as the gateway
protocol's own tests make them, and the gateway tests' lab (the agent's tests share it)."""

from gateways.tests.conftest import make_gateway, server  # noqa: F401
from tests.test_gateway_routing import lab, two_versions  # noqa: F401
