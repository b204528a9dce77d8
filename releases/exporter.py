"""How releases ended, on `/metrics` (metrics/exporter.py collects it): per service, from
the same database aggregate as `/api/v1/releases/stats/`, all releases since the first."""

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from releases import outcomes, states


class ReleaseOutcomesCollector(Collector):
    def collect(self) -> Iterator[Metric]:
        finished = CounterMetricFamily(
            "graylane_release_outcomes",
            "Finished releases by outcome (promoted, rolled_back, aborted, failed).",
            labels=["service", "outcome"],
        )
        median = GaugeMetricFamily(
            "graylane_release_promote_seconds_median",
            "Median seconds from a release's start to its promotion (absent: none promoted).",
            labels=["service"],
        )
        failure = GaugeMetricFamily(
            "graylane_release_change_failure_ratio",
            "Share of the finished releases that were rolled back or failed.",
            labels=["service"],
        )
        for row in outcomes.per_service():
            for outcome in states.FINISHED:
                finished.add_metric([row.service, outcome], getattr(row, outcome))
            if row.median_seconds_to_promote is not None:
                median.add_metric([row.service], row.median_seconds_to_promote)
            if row.change_failure_rate is not None:
                failure.add_metric([row.service], row.change_failure_rate / 100)
        yield finished
        yield median
        yield failure


COLLECTOR = ReleaseOutcomesCollector()
