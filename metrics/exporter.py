"""`/metrics`: the dashboard's own state in Prometheus' text format, read from the database
and the live windows at each scrape (nothing is kept in this process, so any web process
answers the same).

Open by default, like most exporters: serve it on a network only Prometheus reaches, or
set METRICS_TOKEN and give Prometheus `authorization: {credentials: <token>}` (sent as
`Authorization: Bearer <token>`). The figures name gateways, registries and services."""

import hmac
import time
from collections.abc import Iterator

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from gateways import generation
from gateways.models import Gateway
from metrics import live
from policy.models import PolicyState
from registry_sync.models import Registry

# More figures for /metrics from apps above metrics, which it cannot import: they register
# their collectors at start-up (releases/apps.py: how releases ended).
APP_COLLECTORS: list[Collector] = []


class GraylaneCollector(Collector):
    def collect(self) -> Iterator[Metric]:
        revision = PolicyState.objects.filter(pk=1).values_list("revision", flat=True).first()
        yield GaugeMetricFamily(
            "graylane_policy_revision", "The live policy's revision.", value=revision or 0
        )
        newest = generation.newest_row()
        current = newest[0] if newest is not None else 0
        yield GaugeMetricFamily(
            "graylane_generation", "The current generation of the gateway document.", current
        )
        lag = GaugeMetricFamily(
            "graylane_gateway_lag_generations",
            "Generations a gateway is behind: current (desired) minus acked.",
            labels=["gateway", "mode"],
        )
        for name, mode, acked in Gateway.objects.values_list("name", "mode", "acked_generation"):
            lag.add_metric([name, mode], max(0, current - acked))
        yield lag
        stale = GaugeMetricFamily(
            "graylane_registry_stale",
            "1 when the registry's last sync failed.",
            labels=["registry"],
        )
        age = GaugeMetricFamily(
            "graylane_registry_seconds_since_success",
            "Seconds since the registry's last successful sync (absent: never).",
            labels=["registry"],
        )
        now = timezone.now()
        for name, is_stale, last_success in Registry.objects.values_list(
            "name", "stale", "last_success_at"
        ):
            stale.add_metric([name], int(is_stale))
            if last_success is not None:
                age.add_metric([name], (now - last_success).total_seconds())
        yield stale
        yield age
        windows = live.store()
        yield CounterMetricFamily(
            "graylane_metrics_samples_ingested",
            "Samples gateways reported that were counted (re-sent ones are not); "
            "rate() of it is the ingest rate.",
            value=windows.ingested(),
        )
        requests = GaugeMetricFamily(
            "graylane_service_requests_per_second",
            "Requests per second gateways reported over the last minute.",
            labels=["service", "version"],
        )
        success = GaugeMetricFamily(
            "graylane_service_success_ratio",
            "Share of those requests without an error, over the last minute.",
            labels=["service", "version"],
        )
        for (service, version), spans in windows.figures(int(time.time())).items():
            minute = spans["1m"]
            requests.add_metric([service, version], minute.total / live.SPANS["1m"])
            rate = minute.success_rate()
            if rate is not None:
                success.add_metric([service, version], rate / 100)
        yield requests
        yield success
        for collector in APP_COLLECTORS:
            yield from collector.collect()


_registry = CollectorRegistry(auto_describe=False)
_registry.register(GraylaneCollector())


@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    token = settings.METRICS_TOKEN
    if token:
        scheme, _, given = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip(), token):
            response = HttpResponse("A bearer token is required.\n", status=401)
            response["WWW-Authenticate"] = 'Bearer realm="metrics"'
            return response
    return HttpResponse(generate_latest(_registry), content_type=CONTENT_TYPE_LATEST)
