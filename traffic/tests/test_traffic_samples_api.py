"""`POST /api/v1/traffic-samples/`: a gateway's sampled requests, kept for the services it
fronts, on each store."""

import time

import pytest
from django.test import override_settings
from rest_framework.test import APIClient

from accounts.models import ApiToken
from metrics.tests.conftest import gateway  # noqa: F401 (a fixture, by name)
from traffic import store as stores
from traffic.tests.conftest import drop, make_store

pytestmark = pytest.mark.django_db


def sample(service="user-app", **more):
    return {
        "ts": time.time(),
        "service": service,
        "method": "GET",
        "path": f"/{service}/hello",
        "ip": "203.0.113.9",
        "user": "1001",
        "city": "Paris",
        "headers": {"gray": "gray-996", "x-user-no": "1001"},
        "status": 200,
        "latency_ms": 3.25,
        **more,
    }


def post(client, name, *samples):
    return client.post(
        "/api/v1/traffic-samples/", {"gateway": name, "samples": list(samples)}, format="json"
    )


def test_samples_of_a_fronted_service_are_kept(gateway, kept):  # noqa: F811
    name, client = gateway
    answer = post(client, name, sample(), sample(user=None, city=None, headers={}))
    assert answer.status_code == 202, answer.data
    assert answer.data == {"accepted": 2, "dropped": 0, "refused": {}, "refused_reasons": {}}
    first, second = kept.window("user-app")
    assert (first.ip, first.user, first.city, first.status) == ("203.0.113.9", "1001", "Paris", 200)
    assert first.headers == {"gray": "gray-996", "x-user-no": "1001"}
    assert (second.user, second.city, second.headers) == (None, None, {})


def test_samples_of_services_the_gateway_does_not_front_are_refused(gateway, kept):  # noqa: F811
    name, client = gateway
    answer = post(client, name, sample(), sample("order-app"), sample("order-app"))
    assert answer.status_code == 202
    assert answer.data["accepted"] == 1
    assert answer.data["refused"] == {"order-app": 2}
    assert "not in the gateway document" in answer.data["refused_reasons"]["order-app"]
    assert kept.window("order-app") == []


def test_samples_over_the_caps_are_dropped(gateway, backend, monkeypatch):  # noqa: F811
    capped = make_store(backend, per_service=2)
    monkeypatch.setattr(stores, "_configured", capped)
    name, client = gateway
    try:
        answer = post(client, name, sample(), sample(), sample())
        assert (answer.data["accepted"], answer.data["dropped"]) == (2, 1)
        assert len(capped.window("user-app")) == 2
    finally:
        drop(capped)


@override_settings(TRAFFIC_SAMPLES=False)
def test_with_sampling_off_nothing_is_kept(gateway, kept):  # noqa: F811
    name, client = gateway
    answer = post(client, name, sample(), sample())
    assert answer.status_code == 202
    assert (answer.data["accepted"], answer.data["dropped"]) == (0, 2)
    assert kept.window() == []


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"ip": "not-an-ip"}, "ip"),
        ({"ts": time.time() + 3600}, "ts"),
        ({"status": 1000}, "status"),
        ({"latency_ms": -1}, "latency_ms"),
        ({"headers": {"Gray": "gray-996"}}, "headers"),
        ({"cookie": "session=1"}, "cookie"),
    ],
)
def test_a_bad_sample_refuses_the_request_naming_the_field(gateway, kept, change, field):  # noqa: F811
    name, client = gateway
    answer = post(client, name, sample(), sample(**change))
    assert answer.status_code == 400
    assert field in answer.data["samples"][1]
    assert kept.window() == []


def test_only_the_gateway_itself_may_send(gateway, kept, make_user):  # noqa: F811
    name, client = gateway
    assert post(client, "gw-other", sample()).status_code == 400
    user = APIClient()
    user.credentials(
        HTTP_AUTHORIZATION=f"Token {ApiToken.objects.issue(make_user('ada', 'admin'))[1]}"
    )
    assert post(user, name, sample()).status_code == 403
    assert post(APIClient(), name, sample()).status_code == 401
    assert kept.window() == []
