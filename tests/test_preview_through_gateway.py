"""The impact preview predicts what a publish then does. A real gateway process samples half
the requests it proxies for 400 callers; the preview runs a draft over those samples; the
draft is published, and the same callers meet the gateway again. The dashboard is
pytest-django's live server (this process), so the store the gateway's posts fill is the
one the preview reads."""

import math

import httpx
import pytest

from testing.gateway_lab import auth
from testing.waiting import wait_until
from traffic import store as stores
from traffic.store import MemorySampleStore

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

CALLERS = [f"u{n}" for n in range(400)]
MOVED = CALLERS[::4]  # a quarter of them, whom the draft sends to gray
NOBODY = "u9999"  # in the draft, but no request of this user was ever seen


@pytest.fixture
def server(live_server):
    return live_server


@pytest.fixture
def kept(monkeypatch):
    fresh = MemorySampleStore()
    monkeypatch.setattr(stores, "_configured", fresh)
    return fresh


def version_for(gateway, user: str) -> str:
    answer = httpx.get(gateway.url + "/user-app/hello", headers={"X-User-No": user}, timeout=5)
    return answer.json()["version"]


def sent_every_sample(gateway) -> bool:
    exported = httpx.get(gateway.url + "/-/metrics", timeout=5).text
    return "graylane_gateway_samples_waiting 0.0" in exported


def test_the_preview_predicts_the_split_a_publish_then_produces(lab, two_versions, kept):
    gateway = lab.start_gateway("--sample-rate", "0.5")
    assert {version_for(gateway, user) for user in CALLERS} == {"V1"}
    wait_until(lambda: sent_every_sample(gateway), what="the gateway's samples to be sent")
    sampled = kept.window("user-app")
    sampled_users = {sample.user for sample in sampled}
    # Half of 400 requests: far from none and from all, whatever the draw.
    assert 120 < len(sampled) < 280

    live = httpx.get(lab.dashboard.url + "/api/v1/policy/", headers=auth(lab.operator_token))
    draft = {**live.json(), "users": [*MOVED, NOBODY]}
    answer = httpx.post(
        lab.dashboard.url + "/api/v1/policy/preview/",
        json={"policy": draft},
        headers=auth(lab.operator_token),
    )
    assert answer.status_code == 200, answer.text
    preview = answer.json()
    figures = preview["services"]["user-app"]
    assert figures["requests"] == len(sampled)
    assert figures["now"] == {"V1": 1.0}
    predicted = figures["draft"]["V2"]
    assert figures["moved"] == pytest.approx(predicted)
    assert figures["users_moved"] == len(sampled_users & set(MOVED))
    users_matched = {
        rule["value"]: rule["matched"] for rule in preview["rules"] if rule["rule"] == "user"
    }
    assert users_matched[NOBODY] == 0  # reported as a rule that matched nothing

    lab.policy(users=draft["users"])
    wait_until(lambda: version_for(gateway, MOVED[0]) == "V2", what="the published draft")
    after = [version_for(gateway, user) for user in CALLERS]
    actual = after.count("V2") / len(after)
    assert actual == len(MOVED) / len(CALLERS)
    # The prediction is the share among a random half of the requests: within three
    # standard errors of a share estimated from that many requests.
    error = math.sqrt(actual * (1 - actual) / len(sampled))
    assert abs(predicted - actual) <= 3 * error, (predicted, actual, len(sampled))
