"""Fixtures of the tests in tests/: the dashboard under test and gateways, as the gateway
protocol's own tests make them."""

from gateways.tests.conftest import make_gateway, server  # noqa: F401
