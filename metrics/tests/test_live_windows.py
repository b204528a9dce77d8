"""The live windows, on both backends: sliding spans, counted once, withdrawn on failure."""

import time

import pytest

from metrics import latency, live
from metrics.samples import Sample


def s(ts, total=10, errors=0, p95=5.0, service="user-app", version="V1", lane=None):
    return Sample(service, version, ts, total, errors, p95, lane)


def test_each_span_sums_the_seconds_inside_it(windows):
    now = int(time.time())
    windows.accept("gw-1", [s(now, 10, 1), s(now - 9, 20), s(now - 10, 40, 4), s(now - 299, 80)])
    windows.accept("gw-2", [s(now, 5, 5, p95=900.0), s(now - 300, 1000)])
    spans = windows.figures(now)[("user-app", "V1")]
    assert (spans["10s"].total, spans["10s"].errors) == (35, 6)
    assert (spans["1m"].total, spans["1m"].errors) == (75, 10)
    assert (spans["5m"].total, spans["5m"].errors) == (155, 10)
    # 5 of 35 requests at 900 ms are more than 5 %: the p95 is theirs.
    assert spans["10s"].p95() == latency.upper_edge(latency.bucket_of(900.0))
    assert spans["5m"].p95() == latency.upper_edge(latency.bucket_of(5.0))


def test_a_series_quiet_for_a_while_counts_down_until_its_last_sample_is_5_min_old(windows):
    now = int(time.time())
    windows.accept("gw-1", [s(now - 5, version="V2"), s(now - 30, version="V1")])
    windows.accept("gw-1", [s(now - 300, version="V3")])
    figures = windows.figures(now)
    assert list(figures) == [("user-app", "V1"), ("user-app", "V2")]
    quiet = figures[("user-app", "V1")]
    assert (quiet["10s"].total, quiet["1m"].total, quiet["5m"].total) == (0, 10, 10)
    assert quiet["10s"].success_rate() is None


def test_a_sample_is_counted_once_per_gateway_and_withdrawn_on_failure(windows):
    now = int(time.time())
    assert windows.accept("gw-1", [s(now)]).new == [s(now)]
    assert windows.accept("gw-1", [s(now), s(now - 1)]).new == [s(now - 1)]
    assert windows.accept("gw-2", [s(now)]).new == [s(now)]
    assert windows.ingested() == 3
    windows.withdraw("gw-2", [s(now)])
    assert windows.ingested() == 2
    assert windows.figures(now)[("user-app", "V1")]["10s"].total == 20
    assert windows.accept("gw-2", [s(now)]).new == [s(now)], (
        "a withdrawn sample counts when re-sent"
    )


@pytest.mark.parametrize("service", ["odd/name with spaces", 'quote"d:name'])
def test_any_service_name_round_trips(windows, service):
    now = int(time.time())
    windows.accept("gw-1", [s(now, service=service)])
    assert list(windows.figures(now)) == [(service, "V1")]


def test_each_second_is_claimed_once_and_never_an_older_one(windows):
    now = int(time.time())
    assert windows.claim(now)
    assert not windows.claim(now)
    assert not windows.claim(now - 1)
    assert windows.claim(now + 1)


def test_each_gateways_figures_are_kept_apart_too(windows):
    now = int(time.time())
    windows.accept("gw-1", [s(now - 2, 10, 1), s(now - 1, 20)])
    windows.accept("gw-2", [s(now - 1, 30, 3, p95=900.0), s(now - 20, 1000)])
    windows.withdraw("gw-1", [s(now - 1, 20)])
    v1, v2 = ("user-app", "V1"), ("user-app", "V2")
    got = windows.by_gateway([v1, v2], now - 10, now)
    assert got[v2] == {}
    assert set(got[v1]) == {"gw-1", "gw-2"}
    assert (got[v1]["gw-1"].total, got[v1]["gw-1"].errors) == (10, 1)
    gw2 = got[v1]["gw-2"]
    assert (gw2.total, gw2.errors, gw2.p95()) == (30, 3, latency.upper_edge(latency.bucket_of(900)))
    assert windows.by_gateway([v1], now, now) == {v1: {}}


def test_the_series_cap_counts_the_series_heard_of_lately(windows, settings):
    settings.METRICS_MAX_SERIES = 2
    now = int(time.time())
    quiet = now - live.keep_seconds() - 5  # before what the windows remember
    assert windows.accept("gw-1", [s(quiet), s(now, version="V2")]).new == [
        s(quiet),
        s(now, version="V2"),
    ]
    counted = windows.accept("gw-2", [s(now, version="V3"), s(now, version="V2")])
    assert counted == live.Counted([s(now, version="V3"), s(now, version="V2")], [])
    refused = windows.accept("gw-1", [s(now, version="V4"), s(now - 1, version="V3")])
    assert refused == live.Counted([s(now - 1, version="V3")], [s(now, version="V4")])
    assert sorted(windows.figures(now)) == [("user-app", "V2"), ("user-app", "V3")]


def test_a_gateways_lanes_of_one_second_each_count_once(windows):
    """A gateway sends one sample per lane of a series and second: each is its own, counted
    once; the series and each gateway's figures add them up."""
    now = int(time.time())
    plain, gray, lane = s(now, 10, 1), s(now, 20, lane="gray"), s(now, 30, 3, lane="feature-x")
    assert windows.accept("gw-1", [plain, gray, lane]).new == [plain, gray, lane]
    assert windows.accept("gw-1", [plain, gray, lane]).new == []
    assert windows.accept("gw-2", [gray]).new == [gray]
    spans = windows.figures(now)[("user-app", "V1")]
    assert (spans["10s"].total, spans["10s"].errors) == (80, 4)
    windows.withdraw("gw-1", [lane])
    got = windows.by_gateway([("user-app", "V1")], now, now)[("user-app", "V1")]
    assert {gateway: (f.total, f.errors) for gateway, f in got.items()} == {
        "gw-1": (30, 1),
        "gw-2": (20, 0),
    }
    assert windows.accept("gw-1", [lane]).new == [lane], "a withdrawn lane counts when re-sent"
