"""Which samples a gateway may report: only for services it fronts (those in the gateway
document it acked, narrowed by its record's `fronts`), within the installation's series cap.
The rest of a batch is taken; what was refused is answered per service and counted on the
gateway's row, and never shows on /metrics."""

import time

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from gateways import generation
from gateways.models import Gateway
from metrics.tests.conftest import post, sample
from registry_sync.models import Service

pytestmark = pytest.mark.django_db


def gateway_client(name: str, *, services=(), acks=True, **fields) -> APIClient:
    """A gateway `name` (its token in the client); with `acks`, it acked a generation of the
    document holding `services` (made now), as a pull gateway that just polled."""
    for service in services:
        Service.objects.get_or_create(name=service)
    if acks:
        fields.update(acked_generation=generation.bump("test"), last_seen=timezone.now())
    _, token, _ = Gateway.objects.create_with_credentials(name=name, mode=Gateway.PULL, **fields)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    return client


def live_totals(windows) -> dict:
    return {
        series: spans["10s"].total for series, spans in windows.figures(int(time.time())).items()
    }


def test_a_gateway_that_acked_no_document_fronts_nothing(windows):
    client = gateway_client("idle", services=["user-app"], acks=False)
    response = post(client, "idle", sample(service="user-app"), sample(service="user-app", ts=1))
    # (ts=1 is long ago: a malformed batch is still a 400 before anything is refused)
    assert response.status_code == 400 and "samples" in response.json()
    response = post(client, "idle", sample(service="user-app", total=120))
    assert response.status_code == 202, response.content
    assert response.json()["accepted"] == 0
    assert response.json()["refused"] == {"user-app": 1}
    assert live_totals(windows) == {}
    assert Gateway.objects.get(name="idle").refused_samples == 1


def test_only_services_of_the_acked_document_are_taken_and_the_rest_is_answered(windows):
    client = gateway_client("edge", services=["user-app"])
    response = post(
        client,
        "edge",
        sample(service="user-app", total=120),
        sample(service="ghost-app", version="V1"),
        sample(service="ghost-app", version="V2"),
        sample(service="other-ghost"),
    )
    assert response.status_code == 202, response.content
    assert response.json()["accepted"] == 1
    assert response.json()["refused"] == {"ghost-app": 2, "other-ghost": 1}
    assert live_totals(windows) == {("user-app", "V1"): 120}


def test_a_service_newer_than_the_acked_document_is_refused_until_the_gateway_acks_it(windows):
    client = gateway_client("edge", services=["user-app"])
    Service.objects.create(name="order-app")
    generation.bump("order-app appeared")
    assert post(client, "edge", sample(service="order-app")).json()["refused"] == {"order-app": 1}
    Gateway.objects.filter(name="edge").update(acked_generation=generation.newest_number())
    answer = post(client, "edge", sample(service="order-app")).json()
    assert (answer["accepted"], answer["refused"]) == (1, {})


def test_the_gateway_record_narrows_what_it_fronts(windows, api):
    client = gateway_client("edge", services=["user-app", "order-app"], fronts=["user-app"])
    response = post(client, "edge", sample(service="user-app"), sample(service="order-app"))
    assert response.json()["refused"] == {"order-app": 1}
    assert response.json()["accepted"] == 1
    admin = api("admin")
    row = admin.get("/api/v1/gateways/edge/").json()
    assert row["fronts"] == ["user-app"]
    assert row["refused_samples"] == 1
    assert row["last_refused"] == {"order-app": 1}
    widened = admin.patch("/api/v1/gateways/edge/", {"fronts": []}, format="json")
    assert widened.status_code == 200 and widened.json()["fronts"] == []
    answer = post(client, "edge", sample(service="order-app")).json()
    assert (answer["accepted"], answer["refused"]) == (1, {})


def test_fronts_must_be_service_names(api):
    gateway_client("edge")
    admin = api("admin")
    for bad in (["user-app", ""], "user-app", [1], ["x" * 256], ["  "]):
        response = admin.patch("/api/v1/gateways/edge/", {"fronts": bad}, format="json")
        assert response.status_code == 400 and "fronts" in response.json(), (bad, response.content)
    assert Gateway.objects.get(name="edge").fronts == []
    tidy = admin.patch(
        "/api/v1/gateways/edge/", {"fronts": ["user-app", "order-app", "user-app"]}, format="json"
    )
    assert tidy.json()["fronts"] == ["order-app", "user-app"]


def test_5000_refused_series_leave_metrics_the_same_size(windows, client, settings):
    settings.METRICS_MAX_SAMPLES = 1000
    gateway = gateway_client("edge", services=["user-app"])
    now = int(time.time())
    assert post(gateway, "edge", sample(now - 5, total=60)).json()["accepted"] == 1
    before = client.get("/metrics").content
    for batch in range(5):
        forged = [sample(now - 5, service=f"ghost-{batch}-{n}") for n in range(1000)]
        answer = post(gateway, "edge", *forged)
        assert answer.status_code == 202, answer.content
        assert answer.json()["accepted"] == 0 and len(answer.json()["refused"]) == 1000
    after = client.get("/metrics").content
    assert len(after) == len(before), (len(before), len(after))
    assert after == before
    assert Gateway.objects.get(name="edge").refused_samples == 5000
    assert len(Gateway.objects.get(name="edge").last_refused) <= 20, "the row stays small"


def test_the_series_cap_refuses_new_series_and_keeps_taking_known_ones(windows, settings):
    settings.METRICS_MAX_SERIES = 3
    client = gateway_client("edge", services=["user-app", "order-app"])
    now = int(time.time())
    first = post(
        client,
        "edge",
        *(sample(now - 2, version=f"V{n}") for n in range(1, 6)),
        sample(now - 2, service="order-app"),
    ).json()
    assert first["accepted"] == 3
    assert sum(first["refused"].values()) == 3
    assert "METRICS_MAX_SERIES" in first["refused_reasons"]["order-app"]
    taken = set(live_totals(windows))
    assert len(taken) == 3
    # The series already counted go on being counted; new ones are still refused.
    again = post(
        client, "edge", *(sample(now - 1, service=s, version=v) for s, v in sorted(taken))
    ).json()
    assert (again["accepted"], again["refused"]) == (3, {})
    other = gateway_client("core", services=["user-app"])
    assert post(other, "core", sample(now - 1, version="V9")).json()["refused"] == {"user-app": 1}
    assert set(live_totals(windows)) == taken
