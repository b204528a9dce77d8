"""Envoy and nginx under the agent sample the requests they proxy as the Python gateway does
(tests/test_traffic_sampling_through_gateway.py): decide.lua draws them and names what the
decision read, the engine logs them, the agent sends them. The dashboard is pytest-django's
live server, so the test reads the very store the agent's posts filled."""

import time

import httpx
import pytest

from testing.agent_lab import engines, start_agent
from testing.gateway_lab import SLOW_SECONDS
from tests.test_traffic_sampling_through_gateway import get, kept, samples_of, server  # noqa: F401

pytestmark = [
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
    pytest.mark.parametrize("engine", engines()),
]


def test_every_request_is_sampled_with_the_rule_headers_only(engine, lab, two_versions, kept):  # noqa: F811
    lab.policy(users=["1001"], city_header="X-City")
    agent = start_agent(lab, engine, "--sample-rate", "1", "--trusted-proxies", "127.0.0.0/8")
    headers = {
        "X-User-No": "1001",
        "X-City": "Paris",
        "X-Forwarded-For": "203.0.113.9",
        "X-Secret": "not for the dashboard",
        "Authorization": "Bearer not-either",
    }
    assert get(agent, "/user-app/hello?q=1", **headers).json()["version"] == "V2"
    assert get(agent, "/user-app/hello", gray="gray-996").json()["version"] == "V2"
    assert get(agent, "/user-app/x/fail").status_code == 500
    assert get(agent, "/user-app/x/slow").status_code == 200
    # A Latin-1 value read as the Python gateway reads it, and JSON's quote and backslash.
    odd = httpx.get(agent.url + "/user-app/odd", headers={"X-City": b'Z\xfcrich "1\\'})
    assert odd.status_code == 200

    by_user, by_header = samples_of(kept, "/user-app/hello", 2)
    assert (by_user.service, by_user.method, by_user.ip) == ("user-app", "GET", "203.0.113.9")
    assert (by_user.user, by_user.city, by_user.status) == ("1001", "Paris", 200)
    # The headers some rule names (the user header, the city header), and no other.
    assert by_user.headers == {"x-user-no": "1001", "x-city": "Paris"}
    assert (by_header.ip, by_header.user, by_header.city) == ("127.0.0.1", None, "local")
    assert by_header.headers == {"gray": "gray-996"}
    # nginx measures to the millisecond: a fast answer may take 0 ms; a slow one shows.
    assert by_user.latency_ms >= 0
    (slow,) = samples_of(kept, "/user-app/x/slow", 1)
    assert slow.latency_ms >= SLOW_SECONDS * 1000 - 1
    assert abs(by_user.ts - time.time()) < 30
    (failed,) = samples_of(kept, "/user-app/x/fail", 1)
    assert failed.status == 500
    (latin,) = samples_of(kept, "/user-app/odd", 1)
    assert latin.city == 'Zürich "1\\'
    assert latin.headers == {"x-city": 'Zürich "1\\'}


def test_an_agent_with_sampling_off_sends_nothing(engine, lab, two_versions, kept):  # noqa: F811
    off = start_agent(lab, engine, "--samples", "false", "--sample-rate", "1", name="gw-off")
    on = start_agent(lab, engine, "--sample-rate", "1", name="gw-on")
    for _ in range(5):
        get(off, "/user-app/off")
    get(on, "/user-app/on")
    assert len(samples_of(kept, "/user-app/on", 1)) == 1
    # The off agent's reports (every second, as the on one's) had as long to arrive.
    time.sleep(1.5)
    assert samples_of(kept, "/user-app/off", 1, within=0) == []
    assert not (off.workdir / "samples.log").exists()
