"""Real gateway processes sample the requests they proxy to real instances, and the
dashboard keeps what a preview or a replay needs: the dashboard is pytest-django's live
server (in this process), so the test reads the very store the gateways' posts filled."""

import time

import httpx
import pytest

from traffic import store as stores
from traffic.tests.conftest import BACKENDS, drop, make_store

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def server(live_server):
    return live_server


@pytest.fixture(params=BACKENDS)
def kept(request, monkeypatch):
    """The dashboard's sample store: memory, then (with REDIS_URL) Redis."""
    fresh = make_store(request.param)
    monkeypatch.setattr(stores, "_configured", fresh)
    yield fresh
    drop(fresh)


def get(gateway, path, **headers) -> httpx.Response:
    return httpx.get(gateway.url + path, headers=headers, timeout=5)


def samples_of(kept, path: str, count: int, within: float = 30.0) -> list:
    """The samples of `path` once `count` have come (an engine, its agent's tail and the
    reporter's second each add to the wait on a loaded machine), or what came by `within`."""
    deadline = time.monotonic() + within
    while True:
        found = [s for s in kept.window("user-app") if s.path == path]
        if len(found) >= count or time.monotonic() > deadline:
            return found
        time.sleep(0.1)


def test_every_request_is_sampled_with_the_rule_headers_only(lab, two_versions, kept):
    lab.policy(users=["1001"], city_header="X-City")
    gateway = lab.start_gateway("--sample-rate", "1", "--trusted-proxies", "127.0.0.0/8")
    headers = {
        "X-User-No": "1001",
        "X-City": "Paris",
        "X-Forwarded-For": "203.0.113.9",
        "X-Secret": "not for the dashboard",
        "Authorization": "Bearer not-either",
    }
    assert get(gateway, "/user-app/hello?q=1", **headers).json()["version"] == "V2"
    assert get(gateway, "/user-app/hello", gray="gray-996").json()["version"] == "V2"
    assert get(gateway, "/user-app/x/fail").status_code == 500

    by_user, by_header = samples_of(kept, "/user-app/hello", 2)
    assert (by_user.service, by_user.method, by_user.ip) == ("user-app", "GET", "203.0.113.9")
    assert (by_user.user, by_user.city, by_user.status) == ("1001", "Paris", 200)
    # The headers some rule names (the user header, the city header), and no other.
    assert by_user.headers == {"x-user-no": "1001", "x-city": "Paris"}
    assert (by_header.ip, by_header.user, by_header.city) == ("127.0.0.1", None, "local")
    assert by_header.headers == {"gray": "gray-996"}
    assert by_user.latency_ms > 0
    (failed,) = samples_of(kept, "/user-app/x/fail", 1)
    assert failed.status == 500
    exported = httpx.get(gateway.url + "/-/metrics").text
    assert "graylane_gateway_samples_dropped_total 0.0" in exported


def test_a_gateway_with_sampling_off_sends_nothing(lab, two_versions, kept):
    off = lab.start_gateway("--samples", "false", "--sample-rate", "1", name="gw-off")
    on = lab.start_gateway("--sample-rate", "1", name="gw-on")
    for _ in range(5):
        get(off, "/user-app/off")
    get(on, "/user-app/on")
    assert len(samples_of(kept, "/user-app/on", 1)) == 1
    # The off gateway's reports (every second, as the on one's) had as long to arrive.
    time.sleep(1.5)
    assert samples_of(kept, "/user-app/off", 1, within=0) == []
    assert "graylane_gateway_samples" not in httpx.get(off.url + "/-/metrics").text
