"""GET /api/v1/traffic-samples/replay/: a service's recent sampled idempotent requests, for
its own instances only (a service token whose user `issue_token --service` bound to it)."""

import io
import time

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from rest_framework.test import APIClient

from traffic import store as store_module
from traffic.samples import TrafficSample
from traffic.store import MemorySampleStore

pytestmark = pytest.mark.django_db
URL = "/api/v1/traffic-samples/replay/"


@pytest.fixture
def samples(monkeypatch):
    kept = MemorySampleStore()
    monkeypatch.setattr(store_module, "_configured", kept)
    return kept


def issue(*args: str) -> APIClient:
    out = io.StringIO()
    call_command("issue_token", *args, stdout=out, stderr=io.StringIO())
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {out.getvalue().split()[-1]}")
    return client


def sample(ts: float, method: str, path: str, service: str = "user-app", **extra):
    return TrafficSample(ts=ts, service=service, method=method, path=path, ip="10.0.0.7", **extra)


def test_a_bound_instance_gets_its_services_idempotent_samples_newest_first(samples):
    now = time.time()
    samples.accept(
        [
            sample(now - 30, "GET", "/user-app/a", user="1001", headers={"gray": "gray-996"}),
            sample(now - 20, "POST", "/user-app/orders", user="1002"),
            sample(now - 15, "GET", "/order-app/x", service="order-app"),
            sample(now - 10, "HEAD", "/user-app/b"),
            sample(now - 5, "OPTIONS", "/user-app/c", user="1003"),
        ]
    )
    client = issue("fleet", "--role", "service", "--service", "user-app")
    body = client.get(URL, {"service": "user-app"}).json()
    assert body["service"] == "user-app" and body["user_header"] == "X-User-No"
    assert [(s["method"], s["path"], s["user"]) for s in body["samples"]] == [
        ("OPTIONS", "/user-app/c", "1003"),
        ("HEAD", "/user-app/b", None),
        ("GET", "/user-app/a", "1001"),
    ]
    assert body["samples"][2]["headers"] == {"gray": "gray-996"}
    limited = client.get(URL, {"service": "user-app", "limit": 2}).json()["samples"]
    assert [s["path"] for s in limited] == ["/user-app/c", "/user-app/b"]
    assert client.get(URL, {"service": "empty-app"}).status_code == 403


def test_the_user_header_is_the_policys(samples, api):
    assert api("operator").patch("/api/v1/policy/", {"user_header": "X-Uid"}).status_code == 200
    client = issue("fleet", "--role", "service", "--service", "user-app")
    assert client.get(URL, {"service": "user-app"}).json()["user_header"] == "X-Uid"


def test_replay_is_refused_to_anyone_not_bound_to_the_service(samples, api):
    samples.accept([sample(time.time(), "GET", "/user-app/a", user="1001")])
    other = issue("order-fleet", "--role", "service", "--service", "order-app")
    assert other.get(URL, {"service": "user-app"}).status_code == 403
    assert other.get(URL, {"service": "order-app"}).json()["samples"] == []
    unbound = issue("bare-fleet", "--role", "service")
    assert unbound.get(URL, {"service": "user-app"}).status_code == 403
    for role in ("viewer", "operator", "admin"):
        assert api(role).get(URL, {"service": "user-app"}).status_code == 403
    assert APIClient().get(URL, {"service": "user-app"}).status_code == 401


def test_bad_queries_get_field_messages(samples):
    client = issue("fleet", "--role", "service", "--service", "user-app")
    assert "service" in client.get(URL).json()
    for limit in (0, 1001, "many"):
        response = client.get(URL, {"service": "user-app", "limit": limit})
        assert response.status_code == 400 and "limit" in response.json()


def test_bindings_follow_issue_token(samples):
    from django.contrib.auth.models import User

    def bound() -> list[str]:
        user = User.objects.get(username="fleet")
        return list(user.service_bindings.values_list("service", flat=True))

    issue("fleet", "--role", "service", "--service", "user-app", "--service", "order-app")
    assert bound() == ["order-app", "user-app"]
    renewed = issue("fleet", "--role", "service")  # a new token keeps the bindings
    assert renewed.get(URL, {"service": "order-app"}).status_code == 200
    issue("fleet", "--role", "service", "--service", "user-app")
    assert bound() == ["user-app"]
    issue("fleet", "--role", "viewer")
    assert bound() == []
    with pytest.raises(CommandError):
        call_command("issue_token", "fleet", "--role", "viewer", "--service", "user-app")


def test_a_bound_service_user_still_reports_its_lifecycle(samples):
    client = issue("fleet", "--role", "service", "--service", "user-app")
    event = {"service": "user-app", "host": "10.0.0.5", "port": 8080, "event": "starting",
             "at": "2026-12-03T10:00:00Z"}  # fmt: skip
    assert client.post("/api/v1/lifecycle/", event, format="json").status_code == 202
