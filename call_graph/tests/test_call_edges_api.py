"""POST /api/v1/call-edges/ (service token): samples of calls between services, added up per
edge and minute; GET (viewer) lists them, newest first, paginated."""

import time

import pytest

from call_graph import services
from call_graph.models import CallEdge

pytestmark = pytest.mark.django_db

NOW = int(time.time()) // 60 * 60


def sample(**fields):
    return {
        "caller": "user-app",
        "caller_version": "V2",
        "callee": "order-app",
        "callee_version": "V1",
        "lane": "gray",
        "ts": NOW + 5,
        "total": 10,
        "errors": 1,
        **fields,
    }


def post(client, *samples):
    return client.post("/api/v1/call-edges/", {"samples": list(samples)}, format="json")


def test_samples_add_up_per_edge_and_minute_and_a_viewer_lists_them(api):
    fleet = api("service", "fleet")
    assert post(fleet, sample(), sample(ts=NOW + 30, total=5, errors=0)).status_code == 202
    answer = post(fleet, sample(ts=NOW + 50, total=1), sample(lane=None, callee_version="V2"))
    assert answer.status_code == 202 and answer.json() == {"accepted": 2}
    post(fleet, sample(ts=NOW - 120, caller="web-app", caller_version="V1", callee="user-app"))

    listed = api("viewer").get("/api/v1/call-edges/").json()
    assert listed["count"] == 3 and listed["next"] is None
    assert listed["results"][:2] == [
        sample(ts=NOW, total=16, errors=2),
        sample(ts=NOW, lane=None, callee_version="V2"),
    ]
    recent = api("viewer", "v2").get("/api/v1/call-edges/", {"since": NOW - 60}).json()
    assert recent["count"] == 2
    as_time = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(NOW - 180))
    by_service = api("viewer", "v3").get(
        "/api/v1/call-edges/", {"since": as_time, "service": "web-app"}
    )
    assert [r["caller"] for r in by_service.json()["results"]] == ["web-app"]
    refused = api("viewer", "v4").get("/api/v1/call-edges/", {"since": "yesterday"})
    assert refused.status_code == 400 and "since" in refused.json()


@pytest.mark.parametrize(
    "body, field",
    [
        ({"samples": [sample(errors=11)]}, "errors"),
        ({"samples": [sample(callee="no spaces please")]}, "callee"),
        ({"samples": [sample(lane="Not A Lane!")]}, "lane"),
        ({"samples": [sample(ts=int(time.time()) + 3600)]}, "ts"),
        ({"samples": [sample(ts=int(time.time()) - 30 * 86400)]}, "ts"),
        ({"samples": [sample(total=-1)]}, "total"),
        ({"samples": [sample(erors=1)]}, "erors"),
        ({"samples": [{k: v for k, v in sample().items() if k != "caller_version"}]},
         "caller_version"),
    ],
)  # fmt: skip
def test_a_bad_sample_refuses_the_whole_report_naming_the_field(api, body, field):
    response = api("service").post(
        "/api/v1/call-edges/", {"samples": [sample(), *body["samples"]]}, format="json"
    )
    assert response.status_code == 400
    assert field in response.json()["samples"]["1"]
    assert not CallEdge.objects.exists()


def test_empty_and_oversized_reports_are_refused(api):
    fleet = api("service")
    assert "This list may not be empty." in str(post(fleet).json()["samples"])
    many = [sample(total=n, errors=0) for n in range(1001)]
    assert "At most 1000 samples per request." in str(post(fleet, *many).json()["samples"])
    assert not CallEdge.objects.exists()


def test_only_the_fleet_reports_and_only_people_read(api, client):
    assert post(api("operator"), sample()).status_code == 403
    assert post(api("viewer"), sample()).status_code == 403
    assert api("service").get("/api/v1/call-edges/").status_code == 403
    assert (
        client.post("/api/v1/call-edges/", {}, content_type="application/json").status_code == 401
    )
    assert not CallEdge.objects.exists()


def test_rows_older_than_the_retention_are_pruned(api, settings):
    post(api("service"), sample(), sample(ts=NOW - 3 * 86400))
    settings.CALL_EDGES_RETENTION_DAYS = 1
    assert services.prune() == 1
    assert list(CallEdge.objects.values_list("minute", flat=True)) == [NOW]
