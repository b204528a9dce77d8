"""nginx, driven by the agent with `--geoip`, finds a caller's city in the GeoIP2 database
from X-Forwarded-For behind a trusted proxy, as the Python gateway and the simulator do
(tests/test_gateway_routing.py). Envoy's `geoip` filter looks up the peer instead, which on
loopback is always `local`; docs/agent.md says where it differs."""

import pytest

from testing.agent_lab import ENGINE_MISSING, installed, start_agent
from tests.test_gateway_routing import GEOIP_TEST_DB, get

pytestmark = [
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not installed("nginx"), reason=ENGINE_MISSING["nginx"]),
]


def test_a_listed_city_goes_to_gray_via_the_geoip2_module(lab, two_versions):
    lab.policy(cities=["London"])
    geoip = ("--geoip", str(GEOIP_TEST_DB))
    trusting = start_agent(lab, "nginx", "--trusted-proxies", "127.0.0.0/8", *geoip)
    # The GeoIP2 test database puts 81.2.69.142 in London and knows nothing of 198.51.100.1.
    assert get(trusting, **{"X-Forwarded-For": "81.2.69.142"}).json()["version"] == "V2"
    assert get(trusting, **{"X-Forwarded-For": "198.51.100.1"}).json()["version"] == "V1"
    # From an untrusted peer the forwarded address is the client's word: the peer is looked
    # up (loopback: local, not London).
    plain = start_agent(lab, "nginx", *geoip, name="gw-plain")
    assert get(plain, **{"X-Forwarded-For": "81.2.69.142"}).json()["version"] == "V1"
