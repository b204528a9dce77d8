"""Samples by lane: each counted once, the lane kept in the rollups (only a lane the live
document has), the series and the release analysis adding lanes up, and the traffic split."""

import time

import pytest

from metrics import services
from metrics.models import MinuteRollup
from metrics.tests.conftest import post, sample
from metrics.tests.test_ingest import minute_ago_start, nothing_stored
from policy.services import create_lane

pytestmark = pytest.mark.django_db


def make_lane(name: str) -> None:
    create_lane(name, {"priority": 100, "members": {"user-app": "V3"}}, actor="t", source="api")


def stored() -> set[tuple[str, str, int, int]]:
    """(version, lane, total, errors) of every rollup row."""
    return set(MinuteRollup.objects.values_list("version", "lane", "total", "errors"))


def test_each_lane_of_a_second_counts_once_and_the_rollups_keep_it(windows, gateway):
    name, client = gateway
    make_lane("feature-x")
    start = minute_ago_start()
    sent = [
        sample(start + 1, version="V1", total=100, errors=1, p95=10.0),
        sample(start + 1, version="V1", total=20, errors=2, p95=30.0, lane="feature-x"),
        sample(start + 1, version="V2", total=5, p95=8.0, lane="gray"),
    ]
    first = post(client, name, *sent)
    assert first.status_code == 202, first.content
    assert (first.json()["accepted"], first.json()["duplicates"]) == (3, 0)
    again = post(client, name, *sent)
    assert (again.json()["accepted"], again.json()["duplicates"]) == (0, 3)

    assert stored() == {("V1", "", 100, 1), ("V1", "feature-x", 20, 2), ("V2", "gray", 5, 0)}
    # What read the series before lanes still reads a version's requests, every lane of it.
    assert services.success_rate_series("user-app", start, 60) == {
        "V1": [[start, round(100 * 117 / 120, 4), 120]],
        "V2": [[start, 100.0, 5]],
    }
    live = windows.figures(start + 1)[("user-app", "V1")]["10s"]
    assert (live.total, live.errors) == (120, 3)
    analysed = services.window_figures("user-app", ["V1", "V2"], start, start + 1)
    assert set(analysed) == {name}
    assert (analysed[name]["V1"].total, analysed[name]["V1"].errors) == (120, 3)
    assert analysed[name]["V2"].total == 5


def test_a_lane_the_live_document_does_not_have_is_counted_without_it(windows, gateway):
    """Made-up lane names make no rows (and so nothing on the pages), whatever a gateway
    sends; the requests still count for their version."""
    name, client = gateway
    start = minute_ago_start()
    response = post(
        client,
        name,
        sample(start + 1, total=90, errors=0),
        sample(start + 1, total=7, errors=1, lane="made-up"),
        sample(start + 1, total=3, errors=0, lane="feature-y"),
        sample(start + 1, version="V2", total=4, lane="gray"),
    )
    assert (response.json()["accepted"], response.json()["duplicates"]) == (4, 0)
    assert stored() == {("V1", "", 100, 1), ("V2", "gray", 4, 0)}
    assert services.success_rate_series("user-app", start, 60)["V1"] == [[start, 99.0, 100]]

    make_lane("feature-y")  # a new revision: its samples keep their lane from now on
    post(client, name, sample(start + 2, total=6, lane="feature-y"))
    assert ("V1", "feature-y", 6, 0) in stored()


def test_lanes_start_no_series_of_their_own(windows, gateway, settings):
    """METRICS_MAX_SERIES counts (service, version): a version's lanes are one series."""
    settings.METRICS_MAX_SERIES = 1
    name, client = gateway
    make_lane("feature-x")
    now = int(time.time())
    response = post(
        client,
        name,
        sample(now - 1),
        sample(now - 1, lane="gray"),
        sample(now - 1, lane="feature-x"),
        sample(now - 1, version="V2", lane="gray"),
    )
    assert response.json()["accepted"] == 3
    assert response.json()["refused"] == {"user-app": 1}
    assert list(windows.figures(now - 1)) == [("user-app", "V1")]


@pytest.mark.parametrize(
    "lane",
    ["", "Feature-x", "feature_x", "-x", "feature x", " gray", "x" * 64, "héllo", "ok\n"],
)
def test_a_bad_lane_refuses_the_whole_request_naming_it(windows, gateway, lane):
    name, client = gateway
    response = post(client, name, sample(total=10), sample(version="V2", lane=lane))
    assert response.status_code == 400, response.content
    assert set(response.json()["samples"]) == {"1"}
    assert "lane" in response.json()["samples"]["1"]
    assert nothing_stored(windows)


def test_two_samples_of_one_lane_and_second_are_400(windows, gateway):
    name, client = gateway
    now = int(time.time())
    response = post(client, name, sample(now, lane="gray"), sample(now, lane="gray"))
    assert response.status_code == 400
    assert "lane 'gray'" in response.json()["samples"][0]
    assert nothing_stored(windows)


def test_a_null_lane_is_no_lane(windows, gateway):
    name, client = gateway
    start = minute_ago_start()
    response = post(client, name, sample(start + 1, total=5, lane=None))
    assert response.json()["accepted"] == 1
    assert stored() == {("V1", "", 5, 0)}


def test_the_split_shares_the_last_5_minutes_by_version_and_by_lane(windows, gateway):
    name, client = gateway
    make_lane("feature-x")
    now = int(time.time())
    this_minute = now // 60 * 60
    post(
        client,
        name,
        sample(now - 2, version="V1", total=60),
        sample(now - 2, version="V1", total=10, lane="feature-x"),
        sample(now - 2, version="V2", total=20, lane="gray"),
        sample(now - 2, version="V3", total=10, lane="feature-x"),
        # Before the minute that began 5 minutes ago: not in the split.
        sample(this_minute - 360, version="V4", total=1000),
    )
    split = services.traffic_split(["user-app", "order-app"], now)
    assert set(split) == {"user-app"}, "a service without requests is left out"
    user_app = split["user-app"]
    assert user_app.requests == 100
    assert [(s.name, s.requests, s.percent) for s in user_app.versions] == [
        ("V1", 70, 70.0),
        ("V2", 20, 20.0),
        ("V3", 10, 10.0),
    ]
    assert [(s.name, s.requests, s.percent) for s in user_app.lanes] == [
        ("", 60, 60.0),
        ("feature-x", 20, 20.0),
        ("gray", 20, 20.0),
    ]
    assert services.traffic_split(["user-app"], now + 420) == {}
