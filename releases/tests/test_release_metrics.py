"""Several metrics judge each interval: the error-rate test, gray's p95 against prod's
(`max_p95_increase_ms`) and custom PromQL metrics (`metrics`), each listed with its figure
and verdict in the interval's event; a metric that cannot be read holds the step, never
passes. And when data stays short, what would decide."""

import time

import pytest

from releases import analysis, services
from releases.models import Release
from releases.tests.conftest import INTERVAL, LAG, STEPS, kinds, tick, traffic
from testing.processes import free_port

pytestmark = pytest.mark.django_db

P99 = 'max(app_p99_seconds{service="{service}", version="{version}", lane="{lane}"})'


KNOWN = "{service}, {version}, {lane}, {interval}"


def metric(**fields):
    return {"name": "p99", "query": P99, "bound": 0.5, "fail_when": "above", **fields}


def create(client, **analysis):
    return client.post(
        "/api/v1/releases/",
        {
            "service": "user-app",
            "to_version": "V2",
            "steps": STEPS,
            "analysis": {"interval_s": INTERVAL, "min_requests": 50, "deadline_s": 600, **analysis},
        },
        format="json",
    )


def running(api, **analysis):
    """A release started by the API whose first window starts at T0 (`ago` seconds back)."""
    ago = analysis.pop("ago", 60)
    client = api("operator", "olga")
    response = create(client, **analysis)
    assert response.status_code == 201, response.json()
    made = response.json()["id"]
    assert client.post(f"/api/v1/releases/{made}/start/").status_code == 200
    release = Release.objects.get(pk=made)
    release.t0 = int(time.time()) - ago
    Release.objects.filter(pk=made).update(analysed_until=release.t0)
    return release


def analysis_of(release):
    return release.events.filter(kind="analysis").first()


def by_name(detail):
    return {m["name"]: m for m in detail["metrics"]}


def test_gray_p95_far_above_prods_fails_intervals_into_a_rollback(
    api, fleet, windows, record, client
):
    release = running(api, max_p95_increase_ms=50)
    for interval in range(2):
        first = release.t0 + interval * INTERVAL
        record("V2", first, INTERVAL, 200, 1, p95=300.0)  # errors as prod's, much slower
        record("V1", first, INTERVAL, 200, 1, p95=20.0)
        current = tick(release, interval + 1)
        detail = current.events.filter(kind="analysis").first().detail
        assert detail["failed_metrics"] == ["latency"]
        assert "gray p95 304.437 ms above prod's 22.627 ms by more than 50" in detail["reason"]
        assert by_name(detail)["latency"] == {
            "name": "latency",
            "verdict": "fail",
            "figure": 281.81,
            "bound": 50.0,
            "reason": detail["reason"],
        }
        assert by_name(detail)["errors"]["verdict"] in ("pass", "inconclusive")
    assert current.state == "rolled_back" and "advanced" not in kinds(current)
    assert current.events.first().detail["reason"] == detail["reason"]
    client.force_login(api("viewer").user)
    page = client.get(f"/releases/{release.pk}/").content.decode()
    assert 'data-metric="latency" data-verdict="fail">latency: 281.81 (bound 50.0), fail<' in page


def test_a_gray_p95_one_bucket_above_prods_is_not_an_increase(api, fleet, windows, record):
    release = running(api, max_p95_increase_ms=2)
    # 10 ms reads as 11.314 (its bucket's top), 11.5 as 13.454: gray may be as fast as prod.
    record("V2", release.t0, INTERVAL, 200, 1, p95=11.5)
    record("V1", release.t0, INTERVAL, 200, 1, p95=10.0)
    current = tick(release, 1)
    latency = by_name(analysis_of(current).detail)["latency"]
    assert (latency["verdict"], latency["figure"]) == ("pass", 2.14)
    assert (current.state, current.step) == ("running", 1)


def test_too_few_requests_leave_latency_insufficient_not_failed(api, fleet, windows, record):
    release = running(api, min_requests=10, max_p95_increase_ms=50)
    # 50 prod requests in the window (as at a 100 % step): no p95 to compare with.
    record("V2", release.t0, INTERVAL, 200, 0, p95=900.0)
    record("V1", release.t0, INTERVAL, 10, 0, p95=20.0)
    current = tick(release, 1)
    detail = analysis_of(current).detail
    latency = by_name(detail)["latency"]
    assert latency["verdict"] == "insufficient" and latency["figure"] is None
    assert "from 100 requests of each version" in latency["reason"]
    assert "(gray 1000, prod 50)" in latency["reason"]
    assert current.failures == 0 and "failed_metrics" not in detail
    # It does not hold the step: the error test decides.
    assert detail["verdict"] == "healthy" and (current.state, current.step) == ("running", 1)


def test_an_unreachable_prometheus_holds_the_step_and_says_why(
    api, fleet, windows, record, settings
):
    settings.PROMETHEUS_URL = f"http://127.0.0.1:{free_port()}"  # nothing listens
    release = running(api, metrics=[metric()])
    for interval in range(3):
        traffic(record, release, interval)
        current = tick(release, interval + 1)
    assert (current.state, current.step, current.failures) == ("running", 0, 0)
    detail = analysis_of(current).detail
    p99 = by_name(detail)["p99"]
    assert p99["verdict"] == "error" and p99["figure"] is None
    assert "cannot be reached" in p99["reason"]
    assert (detail["verdict"], by_name(detail)["errors"]["verdict"]) == ("inconclusive", "pass")
    assert "waiting for p99: Prometheus at" in detail["reason"]


@pytest.mark.parametrize(
    "metrics, errors",
    [
        (
            [metric(), metric(name="p50", query='up{job="{job}"}')],
            {"1": {"query": [f"Unknown placeholder {{job}} (known: {KNOWN})."]}},
        ),
        ([metric(name="")], {"0": {"name": ["This field may not be blank."]}}),
        ([metric(), metric()], ["Names must differ: p99 repeated."]),
        ([metric(bound="0.5")], {"0": {"bound": ["A number is required."]}}),
        ([metric(bound=True)], {"0": {"bound": ["A number is required."]}}),
        ([metric(fail_when="over")], {"0": {"fail_when": ['"over" is not a valid choice.']}}),
        (
            [metric(name="latency")],
            {"0": {"name": ["'latency' is the analysis' own; pick another."]}},
        ),
        (
            [{"name": "p99"}],
            {"0": {f: ["This field is required."] for f in ("query", "bound", "fail_when")}},
        ),
    ],
)
def test_bad_metrics_are_refused_with_the_field_named(api, fleet, settings, metrics, errors):
    settings.PROMETHEUS_URL = "http://127.0.0.1:9"
    response = create(api("operator"), metrics=metrics)
    assert response.status_code == 400
    assert response.json() == {"analysis": {"metrics": errors}}
    assert not Release.objects.exists()


def test_metrics_need_prometheus_and_a_latency_margin_is_not_negative(api, fleet, settings):
    settings.PROMETHEUS_URL = ""
    response = create(api("operator"), metrics=[metric()], max_p95_increase_ms=-1)
    assert response.status_code == 400
    assert response.json() == {
        "analysis": {
            "metrics": ["Custom metrics are read through Prometheus: PROMETHEUS_URL is not set."],
            "max_p95_increase_ms": ["Ensure this value is greater than or equal to 0."],
        }
    }


def test_repeated_insufficient_data_says_what_would_decide(api, fleet, windows, record, client):
    release = running(api)  # interval 5 s, min_requests 50
    record("V2", release.t0, 2 * INTERVAL, 2, 0)  # 10 gray requests a window
    record("V1", release.t0, 2 * INTERVAL, 100, 0)
    current = tick(release, 1)
    hint = "at 2 req/s on gray, an interval of 25 s or min_requests 10 would decide"
    assert current.events.first().detail["hint"] == hint
    page = api("viewer")
    client.force_login(page.user)
    # One short interval is routine: the page says nothing yet.
    assert 'id="release-hint"' not in client.get(f"/releases/{release.pk}/").content.decode()
    current = tick(release, 2)
    assert current.state == "insufficient_data"
    body = client.get(f"/releases/{release.pk}/").content.decode()
    assert f'id="release-hint">Insufficient data again: {hint}.</p>' in body
    assert 'data-metric="errors" data-verdict="insufficient"' in body
    # Enough traffic again: no hint.
    traffic(record, release, 2)
    assert tick(release, 3).state == "running"
    assert 'id="release-hint"' not in client.get(f"/releases/{release.pk}/").content.decode()


def test_the_hint_when_gray_is_too_slow_for_any_interval(api, fleet, windows, record):
    release = running(api, interval_s=60, min_requests=100, ago=130)
    record("V2", release.t0 + 30, 1, 6, 0)  # 6 requests in a minute: 0.1 req/s
    record("V1", release.t0, 60, 50, 0)
    services.analyse_due(now=release.t0 + 60 + LAG)
    detail = Release.objects.get(pk=release.pk).events.first().detail
    assert detail["hint"] == (
        "at 0.1 req/s on gray, min_requests 6 would decide (an interval would need 1000 s, "
        "above the 300 s allowed)"
    )


def test_the_hint_when_prod_is_short_counts_the_intervals_left():
    settings = analysis.Settings(interval_s=10, min_requests=100)
    verdict = analysis.judge(
        settings,
        window_gray=analysis.Counts(150, 0),
        window_prod=analysis.Counts(30, 0),
        since_start_gray=analysis.Counts(150, 0),
        since_start_prod=analysis.Counts(40, 0),
        failures=0,
    )
    assert verdict.outcome == "insufficient_data"
    assert verdict.detail["hint"] == (
        "at 3 req/s on prod, 2 more intervals would decide, or min_requests 40"
    )
