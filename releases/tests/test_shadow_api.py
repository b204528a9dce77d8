"""Shadow traffic's fields and diff through the API: `mirror` on releases and lane members
(400 for a bad one), what the gateway document and the agent make of it, the gateways'
comparisons and the release's diff (`GET /api/v1/releases/{id}/shadow/`, the page)."""

import json

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from dataplane.agent.ir import MIRROR_SKIPPED, compile_document
from gateways import generation
from gateways.gateway_document import build_document
from gateways.models import Gateway
from releases.models import Release
from releases.tests.test_release_pages import FORM

pytestmark = pytest.mark.django_db

RELEASE = {"service": "user-app", "to_version": "V2", "steps": [{"percent": 5}]}
LANE = {"name": "feature-x", "priority": 100, "members": {"order-app": "V2"}}


@pytest.mark.parametrize(
    ("mirror", "field"),
    [
        ({"percent": 0}, "percent"),
        ({"percent": 100.5}, "percent"),
        ({"percent": 0.001}, "percent"),
        ({"percent": "10"}, "percent"),
        ({}, "percent"),
        ({"percent": 10, "methods": ["POST"]}, "methods"),
        (10, "non_field_errors"),
    ],
)
def test_a_bad_mirror_is_refused_with_its_field(api, fleet, mirror, field):
    operator = api("operator")
    answer = operator.post("/api/v1/releases/", {**RELEASE, "mirror": mirror}, format="json")
    assert answer.status_code == 400, answer.content
    assert field in answer.json()["mirror"]
    lane = {**LANE, "members": {"order-app": {"version": "V2", "mirror": mirror}}}
    answer = operator.post("/api/v1/lanes/", lane, format="json")
    assert answer.status_code == 400, answer.content
    wrong = answer.json()
    assert any(key.startswith("members.order-app.mirror") for key in wrong), wrong


def test_mirrors_reach_the_gateway_document_and_the_agent_skips_them(api, fleet):
    operator = api("operator")
    lane = {**LANE, "members": {"order-app": {"version": "V2", "mirror": {"percent": 2.5}}}}
    answer = operator.post("/api/v1/lanes/", lane, format="json")
    assert answer.status_code == 201, answer.content
    assert answer.json()["members"]["order-app"]["mirror"] == {"percent": 2.5}
    created = operator.post(
        "/api/v1/releases/", {**RELEASE, "mirror": {"percent": 10.0}}, format="json"
    ).json()
    assert created["mirror"] == {"percent": 10}
    assert operator.post(f"/api/v1/releases/{created['id']}/start/").status_code == 200

    document = build_document(generation.bump("test"))
    assert document["services"]["user-app"]["mirror"] == {"percent": 10}
    [listed] = document["lanes"]
    assert listed["members"]["order-app"]["mirror"] == {"percent": 2.5}
    gray = operator.get("/api/v1/lanes/gray/").json()
    assert gray["members"]["user-app"]["mirror"] == {"percent": 10}

    # Envoy and nginx: applied without the mirrors, which the ack lists as skipped.
    compiled = compile_document(json.dumps(document).encode())
    skipped = {entry.record: entry.reason for entry in compiled.skipped}
    assert skipped == {
        "services.user-app.mirror": MIRROR_SKIPPED,
        "lanes[feature-x].members.order-app.mirror": MIRROR_SKIPPED,
    }

    # Aborted: the routing of before, without the mirror.
    assert operator.post(f"/api/v1/releases/{created['id']}/abort/").status_code == 200
    document = build_document(generation.bump("test"))
    assert "mirror" not in document["services"].get("user-app", {})


def comparison(path, total, *, mismatched=0, body=0, version="V2", service="user-app"):
    return {
        "service": service,
        "prod_version": "V1",
        "version": version,
        "path": path,
        "total": total,
        "classes": {"2xx": {"total": total, "mismatched": mismatched}},
        "body_mismatched": body,
        "latency_ms": [[1.0, 3.0]] * total,
        **({"example": {"prod_status": 200, "mirror_status": 503}} if mismatched else {}),
    }


def gateway_client() -> APIClient:
    _, token, _ = Gateway.objects.create_with_credentials(
        name="gw-1",
        mode=Gateway.PULL,
        acked_generation=generation.bump("test"),
        last_seen=timezone.now(),
    )
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    return client


def test_comparisons_make_the_release_diff_on_the_api_and_the_page(api, fleet, client, make_user):
    operator = api("operator")
    release = operator.post(
        "/api/v1/releases/", {**RELEASE, "mirror": {"percent": 10}}, format="json"
    ).json()
    assert operator.post(f"/api/v1/releases/{release['id']}/start/").status_code == 200
    gateway = gateway_client()
    batch = {
        "gateway": "gw-1",
        "comparisons": [
            comparison("/user-app/hello", 8),
            comparison("/user-app/orders", 2, mismatched=2),
            comparison("/user-app/other", 5, version="V3"),  # of no release
            comparison("/ghost-app/x", 1, service="ghost-app"),  # not fronted
        ],
    }
    answer = gateway.post("/api/v1/shadow-comparisons/", batch, format="json")
    assert answer.status_code == 202, answer.content
    assert answer.json() == {"accepted": 2, "unattributed": 1, "refused": {"ghost-app": 1}}
    batch = {"gateway": "gw-1", "comparisons": [comparison("/user-app/hello", 2, body=1)]}
    assert gateway.post("/api/v1/shadow-comparisons/", batch, format="json").status_code == 202

    diff = api("viewer").get(f"/api/v1/releases/{release['id']}/shadow/").json()
    assert diff["comparisons"] == 12
    assert diff["status_classes"] == {"2xx": {"total": 12, "mismatched": 2, "rate": 16.67}}
    assert diff["body_mismatched"] == 1
    assert diff["mismatch_rate"] == 25.0
    assert diff["latency_ms"]["p50"] == {"prod": 1.0, "mirror": 3.0, "shift": 2.0}
    assert [p["path"] for p in diff["differing_paths"]] == ["/user-app/orders", "/user-app/hello"]
    assert diff["differing_paths"][0]["example"] == {"prod_status": 200, "mirror_status": 503}

    assert operator.post("/api/v1/shadow-comparisons/", batch, format="json").status_code == 403
    bad = {"gateway": "gw-1", "comparisons": [{**comparison("/x", 1), "classes": {"6xx": {}}}]}
    assert gateway.post("/api/v1/shadow-comparisons/", bad, format="json").status_code == 400

    client.force_login(make_user("vera", "viewer"))
    page = client.get(f"/releases/{release['id']}/").content.decode()
    assert 'id="release-shadow"' in page
    assert "<code>/user-app/orders</code>" in page
    assert "25 % differing" in page


def test_the_release_form_takes_a_mirror_and_shows_a_bad_one(client, make_user, fleet):
    client.force_login(make_user("olga", "operator"))
    form = {**FORM, "mirror": "0"}
    page = client.post("/releases/", form).content.decode()
    assert "Must be above 0" in page
    assert client.post("/releases/", {**form, "mirror": "12.5"}).status_code == 302
    assert Release.objects.get().mirror == {"percent": 12.5}
