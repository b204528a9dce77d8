"""Who the caller is (routing_engine.caller): the client address behind trusted proxies only,
the city from a trusted city header, else from GeoIP2, and `local` for this network."""

from pathlib import Path

import pytest

from routing_engine import CallerResolver, parse_networks

GEOIP_TEST_DB = Path(__file__).resolve().parents[2] / "tests/data/geoip/GeoIP2-City-Test.mmdb"


@pytest.fixture
def resolver():
    resolver = CallerResolver("10.0.0.0/8, 127.0.0.1", str(GEOIP_TEST_DB))
    yield resolver
    resolver.close()


def test_x_forwarded_for_is_believed_only_from_a_trusted_proxy(resolver):
    assert resolver.client_ip("10.1.1.1", "81.2.69.142") == "81.2.69.142"
    assert resolver.client_ip("198.51.100.7", "81.2.69.142") == "198.51.100.7"
    assert resolver.client_ip("10.1.1.1", None) == "10.1.1.1"


def test_the_client_is_the_nearest_address_not_one_of_our_proxies(resolver):
    # A client may send its own X-Forwarded-For; the proxies append what they saw.
    chain = "1.2.3.4, 81.2.69.142, 10.9.9.9"
    assert resolver.client_ip("10.1.1.1", chain) == "81.2.69.142"
    assert resolver.client_ip("10.1.1.1", "10.2.2.2, 10.3.3.3") == "10.2.2.2"
    assert resolver.client_ip("10.1.1.1", "nonsense, 81.2.69.142") == "81.2.69.142"
    assert resolver.client_ip("10.1.1.1", "81.2.69.142, garbage") == "10.1.1.1"


def test_cities_from_geoip_and_local_for_this_network(resolver):
    assert resolver.resolve("81.2.69.142") == ("81.2.69.142", "London")
    assert resolver.resolve("127.0.0.1") == ("127.0.0.1", "local")
    assert resolver.resolve("192.168.3.4") == ("192.168.3.4", "local")
    assert resolver.resolve("::1") == ("::1", "local")
    assert resolver.resolve("198.51.100.7") == ("198.51.100.7", None)  # not in the database


def test_the_city_header_counts_only_from_a_trusted_proxy(resolver):
    assert resolver.resolve("10.1.1.1", "81.2.69.142", " Paris ") == ("81.2.69.142", "Paris")
    assert resolver.resolve("198.51.100.7", None, "Paris") == ("198.51.100.7", None)
    # Behind a trusted proxy without the header, GeoIP answers for the client address.
    assert resolver.resolve("10.1.1.1", "81.2.69.142", None) == ("81.2.69.142", "London")


def test_without_a_database_only_this_network_has_a_city():
    resolver = CallerResolver()
    assert resolver.resolve("81.2.69.142") == ("81.2.69.142", None)
    assert resolver.resolve("10.0.0.1") == ("10.0.0.1", "local")
    assert resolver.resolve("::ffff:127.0.0.1") == ("::ffff:127.0.0.1", "local")


def test_bad_trusted_proxies_are_refused_by_name():
    with pytest.raises(ValueError, match="10.0.0.300"):
        parse_networks("10.0.0.0/8,10.0.0.300")
