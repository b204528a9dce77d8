import time

import pytest
from django.utils import timezone

from gateways import generation
from gateways.models import Gateway
from metrics import live
from metrics.samples import Sample
from policy.publishing import load_state
from policy.services import update_policy
from registry_sync.models import Instance, Service
from releases import services
from releases.models import Release


@pytest.fixture(autouse=True)
def steps_apply_at_once(settings):
    """Steps do not wait for gateways' acks here (RELEASE_CONVERGENCE_SHARE 0): these tests
    never commit, so no generation is made after a step's revision for the gateways they
    fake to ack. test_convergence.py waits as releases do."""
    settings.RELEASE_CONVERGENCE_SHARE = 0.0


@pytest.fixture
def windows(monkeypatch):
    """A fresh in-memory live store for the metrics the analysis reads."""
    store = live.MemoryWindows()
    monkeypatch.setattr(live, "_configured", store)
    return store


@pytest.fixture
def record(windows, db):
    """`record(version, first_ts, seconds, total, errors)`: that many requests and errors in
    each of `seconds` seconds from `first_ts`, as a gateway reports them (user-app): gw-test,
    in sync (it acked the newest generation and was seen just now)."""
    gateway = Gateway.objects.create_with_credentials(name="gw-test", mode=Gateway.PULL)[0]

    def add(version, first_ts, seconds, total, errors, service="user-app", p95=10.0):
        Gateway.objects.filter(pk=gateway.pk).update(
            acked_generation=generation.newest_number(), last_seen=timezone.now()
        )
        windows.accept(
            "gw-test",
            [
                Sample(service, version, ts, total, errors, p95)
                for ts in range(first_ts, first_ts + seconds)
            ],
        )

    return add


@pytest.fixture
def fleet(db):
    """user-app and order-app with V1 and V2 instances up, gray routing on."""
    load_state()
    update_policy(
        {"enabled": True, "routing": True, "users": ["1001"]},
        partial=True,
        actor="setup",
        source="api",
        expected_revision=None,
    )
    for name in ("user-app", "order-app"):
        service = Service.objects.create(name=name)
        for n, version in enumerate(("V1", "V2")):
            Instance.objects.create(
                service=service,
                instance_id=f"10.0.0.{n}#7201#{name}",
                host=f"10.0.0.{n}",
                port=7201,
                version=version,
                state="UP",
                metadata={"version": version},
            )


# Intervals longer than a test: no analysis changes a release's state behind its back.
QUIET_ANALYSIS = {
    "interval_s": 300,
    "min_requests": 50,
    "max_error_rate_increase": 1.0,
    "failures_tolerated": 1,
    "max_p95_ms": None,
    "deadline_s": 3600,
}

STEPS = [{"targeted": True}, {"percent": 5}, {"percent": 25}, {"percent": 50}, {"percent": 100}]


def started_release(**analysis):
    """A running release of user-app to V2 over STEPS, as an operator starts one by the API
    (`analysis`: settings other than these)."""
    release = services.create_release(
        service="user-app",
        to_version="V2",
        from_version=None,
        steps=STEPS,
        analysis_settings={
            "interval_s": 5,
            "min_requests": 10,
            "max_error_rate_increase": 1.0,
            "failures_tolerated": 1,
            "max_p95_ms": None,
            "deadline_s": 60,
            **analysis,
        },
        actor="olga",
        source="api",
    )
    services.act(release.pk, "start", actor="olga", source="api")
    release.refresh_from_db()
    return release


INTERVAL = 5
LAG = services.REPORT_LAG_SECONDS


@pytest.fixture
def release(fleet, windows):
    """A running release of user-app V2 whose first window starts at T0 (a minute ago)."""
    made = started_release(interval_s=INTERVAL, min_requests=50, deadline_s=600)
    made.t0 = int(time.time()) - 60
    Release.objects.filter(pk=made.pk).update(analysed_until=made.t0)
    return made


def tick(release, intervals_done):
    """Run the beat job as it would run once interval number `intervals_done` has ended."""
    services.analyse_due(now=release.t0 + intervals_done * INTERVAL + LAG)
    return Release.objects.get(pk=release.pk)


def traffic(record, release, interval, gray=(200, 1), prod=(200, 1)):
    """Per second of that interval: (requests, errors) of gray V2 and prod V1."""
    first = release.t0 + interval * INTERVAL
    record("V2", first, INTERVAL, *gray)
    record("V1", first, INTERVAL, *prod)


def kinds(release):
    return [e.kind for e in release.events.order_by("at", "id")]
