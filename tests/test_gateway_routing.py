"""The gateway routes real requests as the reference design's three scenarios and each gray
rule say: a real dashboard (uvicorn), instances registered in its embedded registry, and
`python -m dataplane.gateway` as a process, all over loopback."""

import socket
import time
from collections import Counter
from pathlib import Path

import httpx
import pytest

from testing.gateway_lab import HANG_UP, HOP_HEADERS, SHUTTING_DOWN, SILENT

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]
GEOIP_TEST_DB = Path(__file__).parent / "data" / "geoip" / "GeoIP2-City-Test.mmdb"
SEED_RULES = {
    "enabled": True,
    "routing": True,
    "header": {"name": "gray", "value": "gray-996"},
    "ips": [],
    "cities": [],
    "users": [],
}


def get(gateway, path="/user-app/hello", **headers) -> httpx.Response:
    return httpx.get(gateway.url + path, headers=headers, timeout=5)


def test_scenario_2_a_plain_request_goes_to_prod_and_says_so(lab, two_versions):
    gateway = lab.start_gateway()
    for _ in range(4):
        answer = get(gateway).json()
        assert (answer["version"], answer["gray_status"]) == ("V1", "PROD")
    forwarded = answer["headers"]
    assert forwarded["x-forwarded-for"] == "127.0.0.1"
    assert forwarded["x-forwarded-proto"] == "http"


def test_scenario_3_the_gray_header_goes_to_gray(lab, two_versions):
    gateway = lab.start_gateway()
    for _ in range(4):
        answer = get(gateway, gray="gray-996").json()
        assert (answer["version"], answer["gray_status"]) == ("V2", "GRAY")
    assert get(gateway, gray="gray-997").json()["version"] == "V1"


def test_scenario_1_switch_off_reaches_every_version_even_with_the_header(lab, two_versions):
    lab.policy(enabled=False, routing=False)
    gateway = lab.start_gateway()
    answers = [get(gateway, gray="gray-996").json() for _ in range(10)]
    assert Counter(a["version"] for a in answers) == {"V1": 5, "V2": 5}
    assert {a["gray_status"] for a in answers} == {"ALL"}


def test_routing_off_ignores_versions_though_the_flag_is_still_decided(lab, two_versions):
    lab.policy(routing=False)
    gateway = lab.start_gateway()
    answers = [get(gateway, gray="gray-996").json() for _ in range(6)]
    assert {a["version"] for a in answers} == {"V1", "V2"}
    assert {a["gray_status"] for a in answers} == {"GRAY"}


def test_a_client_cannot_choose_its_own_flag(lab, two_versions):
    gateway = lab.start_gateway()
    answer = get(
        gateway, **{"X-Gray-Status": "GRAY", "baggage": "x-gray-status=GRAY,tenant=acme;p=1"}
    ).json()
    assert (answer["version"], answer["gray_status"]) == ("V1", "PROD")
    assert answer["headers"]["baggage"] == "tenant=acme;p=1,graylane.gray=PROD"


def test_a_listed_user_goes_to_gray(lab, two_versions):
    lab.policy(users=["1001"])
    gateway = lab.start_gateway()
    assert get(gateway, **{"X-User-No": "1001"}).json()["version"] == "V2"
    assert get(gateway, **{"X-User-No": "1002"}).json()["version"] == "V1"


def test_a_listed_network_goes_to_gray_via_x_forwarded_for_from_a_trusted_proxy(lab, two_versions):
    lab.policy(ips=["203.0.113.0/24"])
    trusting = lab.start_gateway("--trusted-proxies", "127.0.0.0/8", name="gw-trusting")
    answer = get(trusting, **{"X-Forwarded-For": "203.0.113.9"}).json()
    assert answer["version"] == "V2"
    assert answer["headers"]["x-forwarded-for"] == "203.0.113.9, 127.0.0.1"
    assert get(trusting, **{"X-Forwarded-For": "198.51.100.1"}).json()["version"] == "V1"
    # Without trusting the peer, its X-Forwarded-For is the client's word: not believed.
    plain = lab.start_gateway(name="gw-plain")
    assert get(plain, **{"X-Forwarded-For": "203.0.113.9"}).json()["version"] == "V1"


def test_the_loopback_caller_is_the_local_city_and_a_listed_ip(lab, two_versions):
    lab.policy(cities=["local"])
    gateway = lab.start_gateway()
    assert get(gateway).json()["version"] == "V2"
    lab.policy(cities=[], ips=["127.0.0.1"])
    restarted = lab.start_gateway(name="gw-2")
    assert get(restarted).json()["version"] == "V2"


def test_a_listed_city_goes_to_gray_via_geoip_and_via_the_trusted_city_header(lab, two_versions):
    lab.policy(cities=["London", "Paris"])
    gateway = lab.start_gateway("--trusted-proxies", "127.0.0.1/32", "--geoip", str(GEOIP_TEST_DB))
    # The GeoIP2 test database puts 81.2.69.142 in London.
    assert get(gateway, **{"X-Forwarded-For": "81.2.69.142"}).json()["version"] == "V2"
    assert get(gateway, **{"X-Forwarded-For": "198.51.100.1"}).json()["version"] == "V1"
    assert get(gateway, **{"X-City": "Paris"}).json()["version"] == "V2"
    # An untrusted caller's city header is not believed.
    untrusting = lab.start_gateway("--geoip", str(GEOIP_TEST_DB), name="gw-untrusting")
    assert get(untrusting, **{"X-City": "Paris"}).json()["version"] == "V1"


def test_unknown_service_is_404_and_no_routable_instance_is_503(lab):
    lab.instance("order-app", "V2")
    lab.sync()
    lab.policy(**SEED_RULES)
    gateway = lab.start_gateway()
    assert get(gateway, "/nobody/hello").status_code == 404
    # PROD never reaches a gray instance, even when no prod instance is left...
    assert get(gateway, "/order-app/hello").status_code == 503
    # ...while GRAY with no gray instance would fall back to prod.
    assert get(gateway, "/order-app/hello", gray="gray-996").json()["version"] == "V2"


def test_gray_without_a_gray_instance_falls_back_to_prod(lab):
    lab.instance("order-app", "V1")
    lab.sync()
    lab.policy(**SEED_RULES)
    gateway = lab.start_gateway()
    answer = get(gateway, "/order-app/hello", gray="gray-996").json()
    assert (answer["version"], answer["gray_status"]) == ("V1", "GRAY")


def test_bodies_stream_both_ways_chunked_and_with_a_length(lab, two_versions):
    gateway = lab.start_gateway()
    body = b"x" * 300_000
    sized = httpx.post(gateway.url + "/user-app/echo", content=body, timeout=10)
    assert sized.json()["body"] == body.decode()
    assert sized.json()["headers"]["content-length"] == str(len(body))

    def pieces():
        yield b"abc"
        yield b"def" * 1000

    chunked = httpx.post(gateway.url + "/user-app/echo", content=pieces(), timeout=10)
    assert chunked.json()["body"] == "abc" + "def" * 1000
    assert chunked.json()["headers"]["transfer-encoding"] == "chunked"


def test_hop_by_hop_headers_do_not_cross(lab, two_versions):
    gateway = lab.start_gateway()
    headers = {
        "Connection": "keep-alive, X-Secret-Hop",
        "X-Secret-Hop": "1",
        "Keep-Alive": "timeout=5",
        "TE": "trailers",
        "Proxy-Authorization": "Basic Zm9vOmJhcg==",
        "X-End-To-End": "kept",
    }
    forwarded = get(gateway, **headers).json()["headers"]
    assert forwarded["x-end-to-end"] == "kept"
    for name in ("connection", "x-secret-hop", "keep-alive", "te", "proxy-authorization"):
        assert name not in forwarded


def test_hop_by_hop_headers_of_the_answer_do_not_cross_either(lab):
    lab.instance("user-app", "V1", HOP_HEADERS)
    lab.sync()
    lab.policy(**SEED_RULES)
    gateway = lab.start_gateway()
    with socket.create_connection(("127.0.0.1", gateway.port)) as sock:
        sock.settimeout(5)
        sock.sendall(b"GET /user-app/hello HTTP/1.1\r\nHost: gw\r\nConnection: close\r\n\r\n")
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    head = answer.partition(b"\r\n\r\n")[0].lower().split(b"\r\n")
    names = {line.partition(b":")[0] for line in head[1:]}
    assert b"x-end-to-end" in names
    assert not names & {b"x-hop", b"keep-alive", b"proxy-authenticate", b"trailer"}, names
    assert b"connection: close" in head  # the gateway's own, for this client


def test_an_instance_shutting_down_is_retried_on_another(lab):
    lab.instance("user-app", "V1", SHUTTING_DOWN)
    lab.instance("user-app", "V1")
    lab.sync()
    lab.policy(**SEED_RULES)
    gateway = lab.start_gateway()
    for method in ("GET", "POST"):
        for _ in range(3):
            response = httpx.request(method, gateway.url + "/user-app/hello", content=b"{}")
            assert response.status_code == 200, response.text
            assert response.json()["version"] == "V1"


def test_a_refused_connection_is_retried_on_another_instance(lab):
    lab.register("user-app", 1, "V1")  # nothing listens on port 1
    good = lab.instance("user-app", "V1")
    lab.sync()
    lab.policy(**SEED_RULES)
    gateway = lab.start_gateway()
    for _ in range(6):
        response = httpx.post(gateway.url + "/user-app/orders", content=b"{}")
        assert response.status_code == 200
    assert len(good.received) == 6


def test_a_post_whose_connection_broke_after_it_was_sent_is_not_retried(lab):
    broken = lab.instance("user-app", "V1", HANG_UP)
    good = lab.instance("user-app", "V1")
    lab.sync()
    lab.policy(**SEED_RULES)
    gateway = lab.start_gateway()
    statuses = [
        httpx.post(gateway.url + "/user-app/orders", content=b'{"n": %d}' % n).status_code
        for n in range(4)
    ]
    posted_to_broken = {r.body for r in broken.received}
    assert posted_to_broken, "round robin sent some to the broken instance"
    assert 502 in statuses
    assert not posted_to_broken & {r.body for r in good.received}, "no POST was sent twice"
    # A GET that broke the same way is sent again: GET is idempotent.
    assert all(get(gateway).status_code == 200 for _ in range(4))


def test_an_instance_that_does_not_answer_in_time_gets_504(lab):
    lab.instance("user-app", "V1", SILENT)
    lab.sync()
    lab.policy(**SEED_RULES)
    gateway = lab.start_gateway("--request-timeout", "0.5")
    started = time.monotonic()
    response = get(gateway)
    assert response.status_code == 504
    assert 0.5 <= time.monotonic() - started < 10 * 0.5  # not before the timeout, nor long after


def test_an_idle_client_connection_is_closed_after_the_idle_timeout(lab, two_versions):
    gateway = lab.start_gateway("--idle-timeout", "0.5")
    with socket.create_connection(("127.0.0.1", gateway.port)) as sock:
        sock.settimeout(10)
        sock.sendall(b"GET /user-app/hello HTTP/1.1\r\nHost: gw\r\n\r\n")
        assert sock.recv(65536).startswith(b"HTTP/1.1 200")
        started = time.monotonic()
        assert sock.recv(1) == b"", "the gateway closed the kept-alive connection"
        assert 0.4 <= time.monotonic() - started < 10 * 0.5
    with socket.create_connection(("127.0.0.1", gateway.port)) as slow:
        slow.settimeout(3)
        slow.sendall(b"GET /user-app/hello HTTP/1.1\r\n")  # a head that never ends
        assert slow.recv(1) == b""


def test_pipelined_requests_are_answered_in_order(lab, two_versions):
    gateway = lab.start_gateway()
    with socket.create_connection(("127.0.0.1", gateway.port)) as sock:
        sock.settimeout(5)
        sock.sendall(
            b"GET /user-app/one HTTP/1.1\r\nHost: gw\r\n\r\n"
            b"GET /user-app/two HTTP/1.1\r\nHost: gw\r\ngray: gray-996\r\n\r\n"
            b"GET /user-app/three HTTP/1.1\r\nHost: gw\r\nConnection: close\r\n\r\n"
        )
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    answers = received.split(b"HTTP/1.1 200 OK")[1:]
    assert len(answers) == 3
    assert [b'"version": "V2"' in a for a in answers] == [False, True, False]


def test_the_gateways_own_pages_and_a_service_named_metrics(lab, two_versions):
    gateway = lab.start_gateway()
    assert httpx.get(gateway.url + "/metrics").text.startswith("# HELP")
    assert httpx.get(gateway.url + "/-/healthz").status_code == 200
    lab.instance("metrics", "V1")
    lab.sync()
    named = lab.start_gateway(name="gw-named")
    assert httpx.get(named.url + "/metrics/x").json()["version"] == "V1"
    assert httpx.get(named.url + "/metrics").json()["version"] == "V1", "the service owns it"
    assert "graylane_gateway_requests_total" in httpx.get(named.url + "/-/metrics").text
