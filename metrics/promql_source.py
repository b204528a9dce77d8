"""The series from Prometheus instead of the rollups, for fleets whose gateways already export
to it (Spring Cloud Gateway via Micrometer, or ours at `/-/metrics`).

Three PromQL templates per service say how: `requests` and `errors` answer, per version,
how many requests (errors) a step held, and `latency_ms_p95` its p95 in milliseconds. Each
must answer one series per version, told apart by a `version` label (one query serves every
version, so there is no `{version}` placeholder). Placeholders: `{service}` (inserted
escaped for a double-quoted PromQL string) and `{step}` (the step as a duration, `60s`).
Defaults: the metrics of Graylane's gateway; PROMETHEUS_QUERIES names a TOML file with
fleet-wide templates and per-service overrides (docs/api.md).

The defaults count exactly: `(c - c offset {step}) >= 0 or c` is what a counter grew by
since one step ago, or, for a series that is new (no value a step ago) or restarted (it
went down), its whole value, which it counted since it began at zero (so a restart misses
what the old process counted in that step). `increase()` would extrapolate to the window's
edges and answer fractions of requests, and it misses all a series counted before its first
scrape: a new version's first requests, the very ones a canary's first step is judged on.
The p95 is read the same way from the gateway's latency histogram: the step's requests in
each bucket, added over lanes and gateways, then `histogram_quantile`, so each request of
the step weighs the same.
"""

from __future__ import annotations

import math
import re
import time
import tomllib
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import httpx
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

import outbound

REQUESTS, ERRORS, LATENCY = "requests", "errors", "latency_ms_p95"
VERSION_LABEL = "version"
PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
PLACEHOLDERS = {"service", "step"}


def _exact_increase(counter: str, by: str = "version") -> str:
    selector = f'{counter}{{service="{{service}}"}}'
    return f"sum by ({by}) (({selector} - {selector} offset {{step}}) >= 0 or {selector})"


DEFAULT_TEMPLATES = {
    REQUESTS: _exact_increase("graylane_gateway_requests_total"),
    ERRORS: _exact_increase("graylane_gateway_errors_total"),
    # Seconds to milliseconds; a version without requests in the step has only empty
    # buckets, whose quantile is NaN: no point.
    LATENCY: "1000 * histogram_quantile(0.95, "
    f"{_exact_increase('graylane_gateway_latency_seconds_bucket', 'version, le')})",
}


class PrometheusError(Exception):
    """The series cannot be read from Prometheus; the message says why, for the caller."""


class PrometheusUnavailable(PrometheusError):
    """Prometheus cannot be reached, or did not answer in time."""


class PrometheusBadAnswer(PrometheusError):
    """Prometheus refused a query (a bad template) or answered what a template must not."""


@dataclass(frozen=True)
class Templates:
    default: dict[str, str]
    services: dict[str, dict[str, str]] = field(default_factory=dict)

    def for_service(self, service: str) -> dict[str, str]:
        return {**self.default, **self.services.get(service, {})}


def _checked(where: str, table: object) -> dict[str, str]:
    if not isinstance(table, dict):
        raise ImproperlyConfigured(f"{where}: expected a table of templates.")
    unknown = sorted(set(table) - set(DEFAULT_TEMPLATES))
    if unknown:
        raise ImproperlyConfigured(
            f"{where}: unknown template {', '.join(unknown)} "
            f"(known: {', '.join(DEFAULT_TEMPLATES)})."
        )
    for name, template in table.items():
        if not isinstance(template, str) or not template.strip():
            raise ImproperlyConfigured(f"{where}.{name}: expected a PromQL string.")
        wrong = sorted(set(PLACEHOLDER.findall(template)) - PLACEHOLDERS)
        if wrong:
            raise ImproperlyConfigured(
                f"{where}.{name}: unknown placeholder {', '.join('{' + w + '}' for w in wrong)} "
                "(known: {service}, {step})."
            )
    return dict(table)


@lru_cache(maxsize=8)
def load_templates(path: str) -> Templates:
    """The templates of a PROMETHEUS_QUERIES file (none: the defaults); a bad file is
    ImproperlyConfigured, naming what is wrong."""
    if not path:
        return Templates(dict(DEFAULT_TEMPLATES))
    try:
        with open(path, "rb") as file:
            document = tomllib.load(file)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ImproperlyConfigured(f"PROMETHEUS_QUERIES={path}: {exc}") from exc
    services = document.pop("services", {})
    default = _checked(f"PROMETHEUS_QUERIES {path}", document)
    if not isinstance(services, dict):
        raise ImproperlyConfigured(f"PROMETHEUS_QUERIES {path}: [services] must be tables.")
    return Templates(
        {**DEFAULT_TEMPLATES, **default},
        {
            name: _checked(f"PROMETHEUS_QUERIES {path} services.{name}", table)
            for name, table in services.items()
        },
    )


def quoted(value: str) -> str:
    """`value` escaped for a double-quoted PromQL string."""
    return value.replace("\\", "\\\\").replace('"', '\\"')


def render(template: str, service: str, step: int) -> str:
    values = {"service": quoted(service), "step": f"{step}s"}
    return PLACEHOLDER.sub(lambda match: values[match.group(1)], template)


Steps = dict[str, dict[int, float]]  # version -> step start -> value


class PrometheusSource:
    def __init__(self, url: str, timeout: float, templates: Templates, policy: outbound.Policy):
        self.url = url.rstrip("/")
        self.timeout = timeout
        self.templates = templates
        self.policy = policy

    def steps(self, service: str, name: str, since: int, step: int) -> Steps:
        """Template `name`'s value per version and step, for the steps from `since` on
        (aligned to multiples of `step` since the epoch, like the rollups). Each step is
        evaluated at its end, so it covers (start, start + step]; the current one, not
        over yet, up to now."""
        template = self.templates.for_service(service)[name]
        first = since // step * step
        now = int(time.time())
        current = now // step * step
        answer: dict[str, dict[int, str]] = {}  # Prometheus sends numbers as strings
        if current > first:
            body = self._call(
                "query_range",
                name,
                query=render(template, service, step),
                start=first + step,
                end=current,
                step=step,
            )
            for version, values in self._series(name, body, "matrix"):
                for at, value in values:
                    answer.setdefault(version, {})[int(float(at)) - step] = value
        elapsed = now - current
        if elapsed > 0:
            body = self._call(
                "query", name, query=render(template, service, elapsed), time=current + elapsed
            )
            for version, (_, value) in self._series(name, body, "vector"):
                answer.setdefault(version, {})[current] = value
        return {
            version: {ts: float(v) for ts, v in points.items() if math.isfinite(float(v))}
            for version, points in answer.items()
        }

    def value(self, name: str, query: str, at: int) -> float | None:
        """The single value `query` answers at `at` (a scalar, or a vector of one series);
        None when it answers no series, or not a number. `name` names it in errors."""
        data = self._call("query", name, query=query, time=at)
        if data.get("resultType") == "scalar":
            found = data["result"][1]
        elif data.get("resultType") == "vector":
            series = data["result"]
            if len(series) > 1:
                raise PrometheusBadAnswer(
                    f"The {name} query answers {len(series)} series, not one: aggregate them, "
                    "e.g. max(...)."
                )
            if not series:
                return None
            found = series[0]["value"][1]
        else:
            raise PrometheusBadAnswer(
                f"The {name} query answers a {data.get('resultType')}, not one value."
            )
        number = float(found)
        return number if math.isfinite(number) else None

    def _call(self, endpoint: str, name: str, **params: str | float) -> dict[str, Any]:
        url = f"{self.url}/api/v1/{endpoint}"
        try:
            with self.policy.client(timeout=self.timeout) as client:
                response = client.post(url, data=params)
        except httpx.TimeoutException:
            raise PrometheusUnavailable(
                f"Prometheus at {self.url} did not answer within {self.timeout:g} s."
            ) from None
        except httpx.HTTPError as exc:
            raise PrometheusUnavailable(
                f"Prometheus at {self.url} cannot be reached ({type(exc).__name__}: {exc})."
            ) from None
        try:
            body = response.json()
        except ValueError:
            body = None
        if not isinstance(body, dict) or "status" not in body:
            raise PrometheusBadAnswer(
                f"{url} answered {response.status_code} without a Prometheus API body: "
                f"{response.text[:200]!r}"
            )
        if body["status"] != "success":
            if response.status_code == 503:
                raise PrometheusUnavailable(f"Prometheus at {self.url}: {body.get('error')}")
            raise PrometheusBadAnswer(
                f"Prometheus refused the {name} template ({body.get('errorType')}): "
                f"{body.get('error')}"
            )
        return body["data"]

    def _series(self, name: str, data: dict, kind: str) -> list[tuple[str, list]]:
        if data.get("resultType") != kind:
            raise PrometheusBadAnswer(
                f"The {name} template answers a {data.get('resultType')}, not an instant "
                "vector (one value per version)."
            )
        series: dict[str, list] = {}
        for item in data["result"]:
            labels = item["metric"]
            version = labels.get(VERSION_LABEL)
            if version is None:
                raise PrometheusBadAnswer(
                    f"The {name} template answers a series without a `{VERSION_LABEL}` label: "
                    f"{labels}; aggregate by it, e.g. sum by (version) (...)."
                )
            if version in series:
                raise PrometheusBadAnswer(
                    f"The {name} template answers several series for version {version!r}: "
                    f"aggregate them, e.g. sum by (version) (...)."
                )
            series[version] = item["values"] if kind == "matrix" else item["value"]
        return list(series.items())


def configured() -> PrometheusSource | None:
    """The installation's Prometheus source (None without PROMETHEUS_URL)."""
    if not settings.PROMETHEUS_URL:
        return None
    return PrometheusSource(
        settings.PROMETHEUS_URL,
        settings.PROMETHEUS_TIMEOUT,
        load_templates(settings.PROMETHEUS_QUERIES),
        settings.OUTBOUND_POLICY,
    )
