"""Envoy and nginx, driven by the agent with `--geoip`, find a caller's city in the GeoIP2
database from X-Forwarded-For behind a trusted proxy, as the Python gateway and the simulator
do (tests/test_gateway_routing.py): nginx's geoip2 module and Envoy's geoip filter both look
up the client the Lua decision names."""

import pytest

from testing.agent_lab import engines, start_agent
from tests.test_gateway_routing import GEOIP_TEST_DB, get

pytestmark = [
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
    pytest.mark.parametrize("engine", engines()),
]


def test_a_listed_city_goes_to_gray_via_geoip(lab, two_versions, engine):
    lab.policy(cities=["London"])
    geoip = ("--geoip", str(GEOIP_TEST_DB))
    trusting = start_agent(lab, engine, "--trusted-proxies", "127.0.0.0/8", *geoip)
    # The GeoIP2 test database puts 81.2.69.142 in London and knows nothing of 198.51.100.1.
    assert get(trusting, **{"X-Forwarded-For": "81.2.69.142"}).json()["version"] == "V2"
    assert get(trusting, **{"X-Forwarded-For": "198.51.100.1"}).json()["version"] == "V1"
    # From an untrusted peer the forwarded address is the client's word: the peer is looked
    # up (loopback: local, not London).
    plain = start_agent(lab, engine, *geoip, name="gw-plain")
    assert get(plain, **{"X-Forwarded-For": "81.2.69.142"}).json()["version"] == "V1"
