"""Use cases of the metrics app: ingest samples, read history series (from the rollups, or
from Prometheus) and the traffic split, publish the live figures, prune old rollups."""

import json
import logging
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime

from django.conf import settings
from django.db import DatabaseError
from django.db.models import Sum

import events
from gateways import fronting
from gateways.models import Gateway
from metrics import live, promql_source, rollups
from metrics.models import MinuteLatency, MinuteRollup
from metrics.samples import Figures, Sample
from policy.lanes import lanes_of
from policy.models import PolicyState
from routing_engine.lanes import GRAY_LANE

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Ingested:
    accepted: int  # counted now
    duplicates: int  # counted before (re-sent)
    refused: dict[str, int]  # service -> samples not taken
    reasons: dict[str, str]  # service -> why they were not


def ingest(gateway: Gateway, samples: list[Sample]) -> Ingested:
    """Count the samples of services this gateway fronts (gateways/fronting.py) that it had
    not sent before, live and in the rollups, as far as the series cap lets them in; the
    others are refused, per service. If the rollups cannot be written, the live count is
    undone too, so the gateway's retry is counted rather than taken for a duplicate."""
    reasons = fronting.refusals(gateway, {sample.service for sample in samples})
    taken = [sample for sample in samples if sample.service not in reasons]
    windows = live.store()
    counted = windows.accept(gateway.name, taken)
    try:
        rollups.add(_known_lanes_only(counted.new))
    except BaseException:
        windows.withdraw(gateway.name, counted.new)
        raise
    refused = Counter(sample.service for sample in samples if sample.service in reasons)
    for sample in counted.over_cap:
        refused[sample.service] += 1
        reasons.setdefault(
            sample.service,
            f"over METRICS_MAX_SERIES: {settings.METRICS_MAX_SERIES} series had samples "
            f"in the last {live.keep_seconds()} s",
        )
    try:
        fronting.record_refused(gateway, dict(refused))
    except DatabaseError:
        # The samples are committed: the answer must say so (a retry would find them
        # duplicates); the row's count is what is lost.
        log.exception("Could not count %s refused samples on gateway %s.", refused, gateway)
    duplicates = len(taken) - len(counted.new) - len(counted.over_cap)
    return Ingested(
        len(counted.new), duplicates, dict(refused), {name: reasons[name] for name in refused}
    )


class _KnownLanes:
    """The lanes of the live document, `gray` included, read again only when it changed:
    one small query per ingest request that has samples of other lanes (the document, which
    may hold 10,000s of IPs, is parsed once per revision and process). A change is told by
    its revision and time, not the revision alone: a database restored, or emptied between
    tests, numbers revisions again."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._version: tuple[int, datetime] | None = None
        self._names: frozenset[str] = frozenset({GRAY_LANE})

    def names(self) -> frozenset[str]:
        version = PolicyState.objects.filter(pk=1).values_list("revision", "updated_at").first()
        with self._lock:
            if version is not None and version != self._version:
                revision, updated_at, content = PolicyState.objects.values_list(
                    "revision", "updated_at", "content"
                ).get(pk=1)
                self._version = (revision, updated_at)
                self._names = frozenset({GRAY_LANE, *lanes_of(json.loads(content))})
            return self._names


_known_lanes = _KnownLanes()


def _known_lanes_only(samples: list[Sample]) -> list[Sample]:
    """The samples with a lane the live document does not have (deleted since the gateway
    counted them, or made up) counted without it: the lanes the rollups keep, and so their
    rows, are the operators' to make, never a gateway's."""
    sent = {sample.lane for sample in samples} - {None, GRAY_LANE}
    if not sent:
        return samples
    known = _known_lanes.names()
    if sent <= known:
        return samples
    return [
        sample if sample.lane is None or sample.lane in known else replace(sample, lane=None)
        for sample in samples
    ]


def _steps(
    service: str, since: int, step: int, until: int | None = None
) -> dict[str, dict[int, Figures]]:
    """The service's rollups from `since` on (up to `until`), summed per version and step
    (steps aligned to multiples of `step` since the epoch, so a chart's points do not move as
    time passes)."""
    first = since // step * step
    rollups = MinuteRollup.objects.filter(service=service, minute__gte=first)
    latencies = MinuteLatency.objects.filter(service=service, minute__gte=first)
    if until is not None:
        rollups, latencies = rollups.filter(minute__lte=until), latencies.filter(minute__lte=until)
    answer: dict[str, dict[int, Figures]] = defaultdict(lambda: defaultdict(Figures))
    for version, minute, total, errors in rollups.values_list(
        "version", "minute", "total", "errors"
    ):
        answer[version][minute // step * step].add(total, errors, {})
    for version, minute, bucket, weight in latencies.values_list(
        "version", "minute", "bucket", "weight"
    ):
        answer[version][minute // step * step].add(0, 0, {bucket: weight})
    return answer


ROLLUPS, PROMETHEUS = "rollups", "prometheus"
Series = dict[str, list[list[float]]]


def _points(by_version: dict[str, dict[int, tuple[float | None, float]]]) -> Series:
    """{version: [[ts, figure, total], ...]}, oldest first, for the steps with a figure."""
    series: Series = {}
    for version, steps in sorted(by_version.items()):
        points = [
            [ts, figure, total]
            for ts, (figure, total) in sorted(steps.items())
            if figure is not None
        ]
        if points:
            series[version] = points
    return series


def _rollup_series(
    service: str,
    since: int,
    step: int,
    value: Callable[[Figures], float | None],
    until: int | None = None,
) -> Series:
    return _points(
        {
            version: {ts: (value(figures), figures.total) for ts, figures in steps.items()}
            for version, steps in _steps(service, since, step, until).items()
        }
    )


def span_series(service: str, since: int, until: int, step: int) -> dict[str, Series]:
    """Success rate and p95 per version and step over [since, until] (a release's span),
    from the rollups: `{"success_rate": Series, "latency": Series}`."""
    return {
        "success_rate": _rollup_series(service, since, step, Figures.success_rate, until),
        "latency": _rollup_series(service, since, step, Figures.p95, until),
    }


def _count(value: float) -> float:
    """A count from Prometheus as the rollups write it: whole unless a template's
    `increase()` extrapolated a fraction."""
    return int(value) if value.is_integer() else round(value, 3)


def _prometheus_series(service: str, since: int, step: int, figure: str) -> Series:
    source = promql_source.configured()
    if source is None:
        raise promql_source.PrometheusUnavailable("No Prometheus is configured (PROMETHEUS_URL).")
    totals = source.steps(service, promql_source.REQUESTS, since, step)
    figures = source.steps(service, figure, since, step)
    by_version: dict[str, dict[int, tuple[float | None, float]]] = {}
    for version, steps in totals.items():
        for ts, total in steps.items():
            if total <= 0:
                continue
            value = figures.get(version, {}).get(ts)
            if figure == promql_source.ERRORS:
                # The two queries are two calls: a scrape landing between them can give the
                # newest step a few more errors than requests.
                errors = min(value or 0.0, total)
                value = round(100.0 * (total - errors) / total, 4)
            by_version.setdefault(version, {})[ts] = (value, _count(total))
    return _points(by_version)


def success_rate_series(service: str, since: int, step: int, source: str = ROLLUPS) -> Series:
    """{version: [[ts, success rate %, total], ...]} for the steps with requests."""
    if source == PROMETHEUS:
        return _prometheus_series(service, since, step, promql_source.ERRORS)
    return _rollup_series(service, since, step, Figures.success_rate)


def latency_series(service: str, since: int, step: int, source: str = ROLLUPS) -> Series:
    """{version: [[ts, p95 ms, total], ...]} for the steps with a reported latency."""
    if source == PROMETHEUS:
        return _prometheus_series(service, since, step, promql_source.LATENCY)
    return _rollup_series(service, since, step, Figures.p95)


# How far back the traffic split looks.
SPLIT_SECONDS = 300


@dataclass(frozen=True)
class Share:
    name: str  # a version, or a lane ("": no lane, PROD and ALL requests)
    requests: int
    percent: float  # of the service's requests in the split


@dataclass(frozen=True)
class TrafficSplit:
    requests: int
    versions: list[Share]  # most requests first
    lanes: list[Share]


def _shares(counts: Counter[str], requests: int) -> list[Share]:
    return [
        Share(name, n, 100.0 * n / requests)
        for name, n in sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    ]


def traffic_split(services: list[str], now: float | None = None) -> dict[str, TrafficSplit]:
    """Each service's requests of the last SPLIT_SECONDS, by version and by lane, from the
    rollups: whole minutes, from the one SPLIT_SECONDS ago was in to the current one (so a
    little more than SPLIT_SECONDS). Services without requests in them are left out."""
    now = time.time() if now is None else now
    first = (int(now) - SPLIT_SECONDS) // 60 * 60
    versions: dict[str, Counter[str]] = defaultdict(Counter)
    lanes: dict[str, Counter[str]] = defaultdict(Counter)
    rows = (
        MinuteRollup.objects.filter(service__in=services, minute__gte=first)
        .values("service", "version", "lane")
        .annotate(requests=Sum("total"))
        .values_list("service", "version", "lane", "requests")
    )
    for service, version, lane, requests in rows:
        versions[service][version] += requests
        lanes[service][lane] += requests
    answer = {}
    for service, counts in versions.items():
        requests = sum(counts.values())
        if requests:
            answer[service] = TrafficSplit(
                requests, _shares(counts, requests), _shares(lanes[service], requests)
            )
    return answer


def _window(figures: Figures, span: int) -> events.MetricsWindow:
    return events.MetricsWindow(
        total=figures.total,
        errors=figures.errors,
        success_rate=figures.success_rate(),
        rate_per_s=round(figures.total / span, 3),
        latency_ms_p95=figures.p95(),
    )


def live_updates(now: int) -> list[events.MetricsUpdated]:
    """One update per series with traffic in the last 5 minutes (the longest window), its
    windows ending at `now`."""
    at = time.time()
    return [
        events.MetricsUpdated(
            service=service,
            version=version,
            ts=now,
            at=at,
            windows={name: _window(spans[name], live.SPANS[name]) for name in live.SPANS},
        )
        for (service, version), spans in live.store().figures(now).items()
    ]


def publish_live(now: int | None = None) -> int:
    """Send the live figures of second `now` (default: the current one) to the pages
    watching, unless they were sent for it already (beat runs this twice a second: a beat
    interval drifts late, and at one a second it would skip seconds). Answers how many
    updates were sent."""
    second = int(time.time()) if now is None else now
    if not live.store().claim(second):
        return 0
    updates = live_updates(second)
    events.publish(*updates)
    return len(updates)


def prune(now: float | None = None) -> int:
    """Delete the rollups older than METRICS_RETENTION_DAYS; answers how many."""
    now = time.time() if now is None else now
    oldest = int(now - settings.METRICS_RETENTION_DAYS * 86400)
    deleted, _ = MinuteRollup.objects.filter(minute__lt=oldest // 60 * 60).delete()
    MinuteLatency.objects.filter(minute__lt=oldest // 60 * 60).delete()
    return deleted


# Per-instance traffic: over the last minute, a success rate from this many requests.
INSTANCE_SPAN = live.SPANS["1m"]
INSTANCE_MIN_REQUESTS = 50


@dataclass(frozen=True)
class InstanceTraffic:
    requests: int
    per_second: float
    success_rate: float | None  # percent; None below INSTANCE_MIN_REQUESTS


def instance_traffic(service: str, now: int | None = None) -> dict[str, InstanceTraffic]:
    """By instance address ("host:port"): its requests of the last minute ending at `now`,
    as gateways that tell which instance answered reported them."""
    now = int(time.time()) if now is None else now
    return {
        address: InstanceTraffic(
            requests=figures.total,
            per_second=round(figures.total / INSTANCE_SPAN, 2),
            success_rate=figures.success_rate() if figures.total >= INSTANCE_MIN_REQUESTS else None,
        )
        for address, figures in live.store()
        .by_instance(service, now - INSTANCE_SPAN + 1, now)
        .items()
    }


def window_figures(
    service: str, versions: list[str], first: int, last: int
) -> dict[str, dict[str, Figures]]:
    """Per gateway that reported any: each version's figures over the seconds [first, last]
    (epoch, inclusive), from the live windows: seconds of the last live.keep_seconds() only."""
    series = [(service, version) for version in versions]
    answer: dict[str, dict[str, Figures]] = defaultdict(
        lambda: {version: Figures() for version in versions}
    )
    for (_, version), per_gateway in live.store().by_gateway(series, first, last).items():
        for gateway, figures in per_gateway.items():
            answer[gateway][version] = figures
    return dict(answer)
