"""POST /api/v1/metrics/ and the history series built from it."""

import json
import time

import pytest

from gateways import generation
from gateways.models import Gateway
from metrics import latency, services
from metrics.models import MinuteLatency, MinuteRollup
from metrics.tests.conftest import post, sample

pytestmark = pytest.mark.django_db


def minute_ago_start() -> int:
    """The start of the previous whole minute: samples in it stay in one rollup row."""
    return int(time.time()) // 60 * 60 - 60


def test_the_series_match_what_was_ingested_to_the_request(windows, gateway):
    name, client = gateway
    _, other_token, _ = Gateway.objects.create_with_credentials(
        name="gw-2", mode=Gateway.PULL, acked_generation=generation.newest_number()
    )
    start = minute_ago_start()
    sent = [
        sample(start + 1, version="V1", total=120, errors=1, p95=12.5),
        sample(start + 2, version="V1", total=80, errors=0, p95=12.0),
        sample(start + 1, version="V2", total=50, errors=5, p95=40.0),
    ]
    assert post(client, name, *sent).status_code == 202
    client.credentials(HTTP_AUTHORIZATION=f"Token {other_token}")
    response = post(client, "gw-2", sample(start + 1, version="V2", total=50, errors=0, p95=30.0))
    assert response.status_code == 202
    assert response.json() == {"accepted": 1, "duplicates": 0, "refused": {}, "refused_reasons": {}}

    rates = services.success_rate_series("user-app", start - 600, 60)
    assert rates == {
        "V1": [[start, 100 * 199 / 200, 200]],
        "V2": [[start, 100 * 95 / 100, 100]],
    }
    p95s = services.latency_series("user-app", start - 600, 60)
    # V1: 200 requests at ~12 ms; V2: 50 at 30 ms and 50 at 40 ms, so its p95 is 40's bucket.
    assert p95s["V1"] == [[start, latency.upper_edge(latency.bucket_of(12.5)), 200]]
    assert p95s["V2"] == [[start, latency.upper_edge(latency.bucket_of(40.0)), 100]]
    assert 40.0 <= p95s["V2"][0][1] <= 40.0 * 1.19


@pytest.mark.parametrize("p95", [0.004, 0.3, 0.9, 1.0, 250.0])
def test_a_p95_reads_back_at_most_19_percent_above_also_below_a_millisecond(windows, gateway, p95):
    """A gateway on loopback answers in tenths of a millisecond: its p95 must not read back
    as 1 ms, in the history nor in the live windows."""
    name, client = gateway
    start = minute_ago_start()
    assert post(client, name, sample(start + 1, total=100, p95=p95)).status_code == 202
    [[_, history, _]] = services.latency_series("user-app", start - 600, 60)["V1"]
    assert p95 <= history <= p95 * 1.19
    live = services.window_figures("user-app", ["V1"], start, start + 1)[name]["V1"].p95()
    assert live == history


def test_the_api_answers_the_series_by_step(windows, gateway, api):
    name, client = gateway
    start = minute_ago_start() // 300 * 300
    if start + 241 > time.time():
        start -= 300
    post(client, name, sample(start + 5, total=10, errors=1), sample(start + 241, total=30))
    viewer = api("viewer")
    answer = viewer.get(f"/api/v1/metrics/success-rate/?service=user-app&since={start}&step=300")
    assert answer.status_code == 200
    assert answer.json() == {"service": "user-app", "series": {"V1": [[start, 97.5, 40]]}}
    by_minute = viewer.get(f"/api/v1/metrics/latency/?service=user-app&since={start}&step=60")
    assert [point[0] for point in by_minute.json()["series"]["V1"]] == [start, start + 240]


def test_a_resent_sample_is_counted_once(windows, gateway):
    name, client = gateway
    start = minute_ago_start()
    first = post(client, name, sample(start + 1, total=100, errors=2))
    again = post(client, name, sample(start + 1, total=100, errors=2), sample(start + 2, total=7))
    assert (first.json()["accepted"], first.json()["duplicates"]) == (1, 0)
    assert (again.json()["accepted"], again.json()["duplicates"]) == (1, 1)
    assert services.success_rate_series("user-app", start, 60)["V1"] == [
        [start, round(100 * 105 / 107, 4), 107]
    ]
    figures = windows.figures(start + 2)[("user-app", "V1")]["10s"]
    assert (figures.total, figures.errors) == (107, 2)


def nothing_stored(windows) -> bool:
    stored = MinuteRollup.objects.exists() or MinuteLatency.objects.exists()
    return not stored and windows.ingested() == 0


@pytest.mark.parametrize(
    "bad,field",
    [
        ({"total": -1}, "total"),
        ({"errors": -3}, "errors"),
        ({"total": 5, "errors": 6}, "errors"),
        ({"erors": 1}, "erors"),
        ({"ts": int(time.time()) + 3600}, "ts"),
        ({"ts": int(time.time()) - 86400}, "ts"),
        ({"ts": "yesterday"}, "ts"),
        ({"latency_ms_p95": "nan"}, "latency_ms_p95"),
        ({"latency_ms_p95": "Infinity"}, "latency_ms_p95"),
        ({"latency_ms_p95": -1}, "latency_ms_p95"),
        ({"version": ""}, "version"),
        ({"lane": "Feature X"}, "lane"),
        ({"lane": ""}, "lane"),
    ],
)
def test_a_bad_sample_refuses_the_whole_request_naming_the_field(windows, gateway, bad, field):
    name, client = gateway
    response = post(client, name, sample(total=10), {**sample(version="V2"), **bad})
    assert response.status_code == 400, response.content
    errors = response.json()["samples"]
    assert set(errors) == {"1"} and field in errors["1"], errors  # by index in the list
    assert nothing_stored(windows)


@pytest.mark.parametrize(
    "body,field",
    [
        ({"gateway": "gw-1", "samples": []}, "samples"),
        ({"gateway": "gw-1"}, "samples"),
        ({"gateway": "someone-else", "samples": [sample()]}, "gateway"),
        ({"gateway": "gw-1", "samples": [sample(), sample()]}, "samples"),
        ({"gateway": "gw-1", "samples": [sample(lane="x"), sample(lane="x")]}, "samples"),
        ({"gateway": "gw-1", "samples": [sample()], "extra": 1}, "extra"),
    ],
)
def test_a_bad_body_is_400_naming_the_field(windows, gateway, body, field):
    _, client = gateway
    response = client.post("/api/v1/metrics/", body, format="json")
    assert response.status_code == 400 and field in response.json(), response.content
    assert nothing_stored(windows)


def test_too_many_samples_is_400(windows, gateway, settings):
    settings.METRICS_MAX_SAMPLES = 3
    name, client = gateway
    now = int(time.time())
    response = post(client, name, *(sample(now - i) for i in range(4)))
    assert response.status_code == 400 and "samples" in response.json()
    assert nothing_stored(windows)


def test_a_10_mb_body_is_413_before_it_is_read(windows, gateway):
    name, client = gateway
    body = json.dumps({"gateway": name, "samples": [sample()] * 80_000})
    assert len(body) > 10_000_000
    response = client.post("/api/v1/metrics/", body, content_type="application/json")
    assert response.status_code == 413
    assert nothing_stored(windows)


@pytest.mark.parametrize("role", ["viewer", "operator", "admin", "service"])
def test_users_tokens_cannot_ingest(windows, api, role):
    response = api(role).post(
        "/api/v1/metrics/", {"gateway": "gw-1", "samples": [sample()]}, format="json"
    )
    assert response.status_code == 403
    assert nothing_stored(windows)


def test_anonymous_and_unknown_tokens_cannot_ingest(windows, client, make_user):
    body = {"gateway": "gw-1", "samples": [sample()]}
    assert client.post("/api/v1/metrics/", body, content_type="application/json").status_code == 401
    make_user("olga", "admin")
    client.login(username="olga", password="pw-for-tests")  # a session is no gateway either
    assert client.post("/api/v1/metrics/", body, content_type="application/json").status_code == 401
    response = client.post(
        "/api/v1/metrics/", body, content_type="application/json", HTTP_AUTHORIZATION="Token nope"
    )
    assert response.status_code == 401
    assert nothing_stored(windows)


@pytest.mark.parametrize(
    "query,field",
    [
        ("since=0", "service"),
        ("service=user-app&step=90", "step"),
        ("service=user-app&step=30", "step"),
        ("service=user-app&step=abc", "step"),
        # An id of its own: each xdist worker collects the test, a second apart maybe.
        pytest.param(f"service=user-app&since={int(time.time()) + 999}", "since", id="future"),
        ("service=user-app&since=0&step=60", "step"),  # 29 million points
    ],
)
@pytest.mark.parametrize("path", ["success-rate", "latency"])
def test_bad_series_parameters_are_400_naming_them(api, path, query, field):
    response = api("viewer").get(f"/api/v1/metrics/{path}/?{query}")
    assert response.status_code == 400 and field in response.json(), response.content


def test_the_series_endpoints_are_in_the_openapi_document(client):
    paths = json.loads(client.get("/api/schema/?format=json").content)["paths"]
    assert {"/api/v1/metrics/", "/api/v1/metrics/success-rate/", "/api/v1/metrics/latency/"} <= set(
        paths
    )
    parameters = {p["name"] for p in paths["/api/v1/metrics/latency/"]["get"]["parameters"]}
    assert {"service", "since", "step", "source"} <= parameters


def test_retention_prunes_old_rollups_only(settings):
    from metrics import tasks

    settings.METRICS_RETENTION_DAYS = 14
    now = int(time.time()) // 60 * 60
    for age_days in (20, 14.01, 13.9, 0):
        minute = int(now - age_days * 86400) // 60 * 60
        MinuteRollup.objects.create(service="user-app", version="V1", minute=minute)
        MinuteLatency.objects.create(
            service="user-app", version="V1", minute=minute, bucket=3, weight=1
        )
    assert tasks.prune.apply().get() == 2
    assert MinuteLatency.objects.count() == 2
    ages = sorted((now - row.minute) / 86400 for row in MinuteRollup.objects.all())
    assert ages[0] == 0 and 13.8 < ages[1] < 13.91 and len(ages) == 2
