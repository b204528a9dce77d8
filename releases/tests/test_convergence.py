"""Convergence-gated steps through the API: a step's analysis starts once the gateways
fronting the service have acked the generation carrying it (acks through the gateway API);
its event says the generation, acked / gateways and the propagation; a stale gateway does
not block but is named; a step that does not converge in time pauses the release with
`not_converged`, naming the gateways that did not ack. Transactional: the generations are
made after each routing change commits, as they are in production."""

import math
import time
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from gateways import generation
from gateways.models import Gateway
from metrics.samples import Sample
from releases import services
from releases.models import Release
from releases.tests.conftest import STEPS

pytestmark = pytest.mark.django_db(transaction=True)

ANALYSIS = {
    "interval_s": 5,
    "min_requests": 10,
    "max_error_rate_increase": 1.0,
    "failures_tolerated": 1,
    "deadline_s": 600,
}


@pytest.fixture(autouse=True)
def steps_wait_for_all(settings):
    settings.RELEASE_CONVERGENCE_SHARE = 1.0
    settings.RELEASE_CONVERGENCE_TIMEOUT = 60.0


@pytest.fixture
def fleet_in_document(fleet):
    """The fleet's services in the gateway document (their instances were written directly,
    not through the registry sync that bumps it), so that a gateway acking it fronts them."""
    generation.bump("the fleet")


class Edge:
    """A pull gateway acking through the gateway API, as dataplane gateways do."""

    def __init__(self, name: str):
        self.name = name
        _, token, _ = Gateway.objects.create_with_credentials(name=name, mode=Gateway.PULL)
        self.client = APIClient()
        self.client.credentials(HTTP_AUTHORIZATION=f"Token {token}")

    def ack(self, number: int | None = None) -> int:
        number = number or generation.newest_number()
        answer = self.client.post(
            f"/api/v1/gateways/{self.name}/ack/", {"generation": number}, format="json"
        )
        assert answer.status_code == 200, answer.content
        return number


def start(api) -> tuple[APIClient, int]:
    operator = api("operator")
    body = {"service": "user-app", "to_version": "V2", "steps": STEPS, "analysis": ANALYSIS}
    created = operator.post("/api/v1/releases/", body, format="json")
    assert created.status_code == 201, created.content
    pk = created.json()["id"]
    assert operator.post(f"/api/v1/releases/{pk}/start/").status_code == 200
    return operator, pk


def events(operator: APIClient, pk: int) -> list[dict]:
    """Oldest first."""
    return list(reversed(operator.get(f"/api/v1/releases/{pk}/events/").json()["results"]))


def kinds(operator: APIClient, pk: int) -> list[str]:
    return [event["kind"] for event in events(operator, pk)]


def traffic(windows, gateway: str, first: int, seconds: int, gray_errors: int = 0) -> None:
    """50 requests a second of each version; `gray_errors` of V2's fail."""
    windows.accept(
        gateway,
        [
            Sample("user-app", version, ts, 50, gray_errors if version == "V2" else 0, 10.0)
            for ts in range(first, first + seconds)
            for version in ("V1", "V2")
        ],
    )


def test_a_step_is_analysed_only_once_its_gateway_acked_it(fleet_in_document, windows, api):
    edge = Edge("edge")
    edge.ack()  # it fronts user-app and is in sync
    operator, pk = start(api)
    routed = generation.newest_number()
    # The start's generation is out; the gateway has not acked it: no started event yet,
    # and no analysis however much time passes.
    before = int(time.time())
    traffic(windows, "edge", before - 20, 20)
    services.analyse_due(now=time.time() + 30)
    assert kinds(operator, pk) == ["created"]
    assert Release.objects.get(pk=pk).state == "running"

    time.sleep(1.1)
    edge.ack(routed)
    acked_at = Gateway.objects.get(name="edge").acked_at.timestamp()
    services.analyse_due()
    started = events(operator, pk)[-1]
    assert started["kind"] == "started"
    detail = started["detail"]
    assert (detail["generation"], detail["acked"], detail["gateways"]) == (routed, 1, 1)
    assert detail["converged"] is True and detail["stale_gateways"] == []
    assert 1000 <= detail["propagation_ms"]["p50"] == detail["propagation_ms"]["max"] < 5000
    # The step's first window starts at the ack: the failing samples of the seconds between
    # the routing and the ack never count.
    first = math.ceil(acked_at)
    traffic(windows, "edge", before, first - before, gray_errors=50)
    traffic(windows, "edge", first, 5)
    services.analyse_due(now=first + 5 + services.REPORT_LAG_SECONDS)
    analysis = events(operator, pk)[-1]
    assert (analysis["kind"], analysis["detail"]["verdict"]) == ("analysis", "healthy")
    assert analysis["detail"]["window_start"] == first
    assert analysis["detail"]["window"]["gray"]["requests"] == 250
    assert analysis["detail"]["window"]["gray"]["error_rate"] == 0.0

    # The advance routed step 2; its event waits for the gateway's ack of that generation.
    assert Release.objects.get(pk=pk).step == 1
    advanced_generation = generation.newest_number()
    assert advanced_generation > routed
    edge.ack(advanced_generation)
    services.analyse_due()
    advanced = events(operator, pk)[-1]
    assert (advanced["kind"], advanced["step"]) == ("advanced", 1)
    assert advanced["detail"]["generation"] == advanced_generation
    assert (advanced["detail"]["acked"], advanced["detail"]["gateways"]) == (1, 1)
    assert advanced["detail"]["reason"]
    assert advanced["detail"]["propagation_ms"]["max"] is not None
    page = signed_in_page(api, pk)
    assert f"generation {advanced_generation}, 1 / 1 gateways acked, propagation p50" in page


def test_a_step_not_acked_in_time_pauses_the_release_naming_the_gateway(
    fleet_in_document, windows, api, settings
):
    settings.RELEASE_CONVERGENCE_TIMEOUT = 1.0
    edge, slow = Edge("edge"), Edge("slow")
    edge.ack()
    slow.ack()
    operator, pk = start(api)
    routed = edge.ack()  # the start's generation; `slow` stays behind
    services.analyse_due()
    assert kinds(operator, pk) == ["created"]
    time.sleep(1.2)
    services.analyse_due()
    assert Release.objects.get(pk=pk).state == "paused"
    timed_out = events(operator, pk)[-1]
    assert timed_out["kind"] == "not_converged"
    detail = timed_out["detail"]
    assert detail["not_acked"] == ["slow"]
    assert (detail["generation"], detail["acked"], detail["gateways"]) == (routed, 1, 2)
    assert "not acked: slow" in detail["reason"]
    page = signed_in_page(api, pk)
    assert "not_converged" in page and "not acked: slow" in page
    assert f"Step 1 waits for the gateways fronting user-app to ack generation {routed}" in page

    # Resumed, the step waits again, and is applied once `slow` acks.
    assert operator.post(f"/api/v1/releases/{pk}/resume/").status_code == 200
    services.analyse_due()
    assert kinds(operator, pk)[-1] == "resumed"
    slow.ack(routed)
    services.analyse_due()
    started = events(operator, pk)[-1]
    assert started["kind"] == "started"
    assert (started["detail"]["acked"], started["detail"]["gateways"]) == (2, 2)
    assert Release.objects.get(pk=pk).state == "running"


def test_a_stale_gateway_does_not_block_a_step_but_is_named(
    fleet_in_document, windows, api, settings
):
    edge, far = Edge("edge"), Edge("far")
    edge.ack()
    far.ack()
    Gateway.objects.filter(name="far").update(
        last_seen=timezone.now() - timedelta(seconds=settings.GATEWAY_STALE_SECONDS + 5)
    )
    operator, pk = start(api)
    edge.ack()
    services.analyse_due()
    started = events(operator, pk)[-1]
    assert started["kind"] == "started"
    detail = started["detail"]
    assert (detail["acked"], detail["gateways"], detail["stale_gateways"]) == (1, 1, ["far"])


def test_with_a_share_below_all_the_step_needs_that_share_of_acks(
    fleet_in_document, windows, api, settings
):
    settings.RELEASE_CONVERGENCE_SHARE = 0.5
    edges = [Edge(name) for name in ("edge-a", "edge-b", "edge-c")]
    for edge in edges:
        edge.ack()
    operator, pk = start(api)
    edges[0].ack()
    services.analyse_due()
    assert kinds(operator, pk) == ["created"]  # 1 of 3: 2 needed
    edges[1].ack()
    services.analyse_due()
    detail = events(operator, pk)[-1]["detail"]
    assert (detail["acked"], detail["gateways"]) == (2, 3)


def test_without_a_gateway_fronting_the_service_a_step_applies_at_once(
    fleet_in_document, windows, api
):
    Edge("elsewhere")  # acked no document: it fronts nothing
    narrow = Edge("narrow")
    narrow.ack()
    Gateway.objects.filter(name="narrow").update(fronts=["order-app"])
    operator, pk = start(api)
    started = events(operator, pk)[-1]
    assert started["kind"] == "started"
    assert (started["detail"]["acked"], started["detail"]["gateways"]) == (0, 0)
    assert started["detail"]["converged"] is True


def signed_in_page(api, pk: int) -> str:
    viewer = api("viewer")
    client = Client()
    client.force_login(viewer.user)
    return client.get(f"/releases/{pk}/").content.decode()
