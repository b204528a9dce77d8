"""Replay warm-up from real traffic, with real processes on loopback: the dashboard (the
live server, whose sample store the test feeds) and an instance of cold_app.py configured
from the environment, registering in a fake Nacos. It replays its own service's sampled
idempotent requests (never a POST) until its success count, then registers; with no
samples, or samples it may not read, it warms up on the configured paths instead."""

import io
import time

import httpx
import pytest
from django.core.management import call_command

from testing.fakes.nacos_fake import FakeNacos
from testing.processes import free_port
from testing.waiting import wait_until
from testing.warmup_lab import ColdInstance
from traffic import store as store_module
from traffic.samples import TrafficSample
from traffic.store import MemorySampleStore

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]
FIXED = "/svc/items/fixed"


def cold_instance(nacos: FakeNacos, dashboard: str, token: str, successes: int) -> ColdInstance:
    return ColdInstance(
        nacos.url,
        dashboard=dashboard,
        token=token,
        PATHS=FIXED,
        SAMPLES="50",
        SUCCESSES=str(successes),
    )


@pytest.fixture
def samples(monkeypatch):
    kept = MemorySampleStore()
    monkeypatch.setattr(store_module, "_configured", kept)
    return kept


@pytest.fixture
def nacos():
    with FakeNacos() as fake:
        yield fake


def token(*services: str) -> str:
    bindings = [arg for name in services for arg in ("--service", name)]
    out = io.StringIO()
    call_command(
        "issue_token", "fleet", "--role", "service", *bindings, stdout=out, stderr=io.StringIO()
    )
    return out.getvalue().split()[-1]


def registered(nacos: FakeNacos, cold: ColdInstance) -> None:
    wait_until(lambda: nacos.instance("svc", "127.0.0.1", cold.port), timeout=20)


def test_warm_up_replays_sampled_idempotent_requests_until_its_success_count(
    live_server, samples, nacos
):
    now = time.time()

    def sample(age: float, method: str, path: str, service: str = "svc", user=None):
        return TrafficSample(now - age, service, method, path, "10.0.0.7", user=user)

    samples.accept(
        [
            sample(50, "GET", "/svc/items/a", user="1001"),
            sample(40, "GET", "/svc/items/b"),
            sample(30, "POST", "/svc/items/orders", user="1002"),
            sample(20, "HEAD", "/svc/items/c"),
            sample(15, "GET", "/other/items/x", service="other"),
            sample(10, "GET", "/svc/items/d", user="1003"),
            sample(5, "GET", "/svc/items/d", user="1004"),
        ]
    )
    with cold_instance(nacos, live_server.url, token("svc"), successes=6) as cold:
        registered(nacos, cold)
        replayed = cold.warmup_requests()
    # Newest first, one of each path before a repeat, round again until six answered 2xx;
    # no POST, no other service's, no configured path; each user in the policy's header.
    in_turn = [
        ("GET", "/svc/items/d", "1004"),
        ("HEAD", "/svc/items/c", None),
        ("GET", "/svc/items/b", None),
        ("GET", "/svc/items/a", "1001"),
        ("GET", "/svc/items/d", "1003"),
    ]
    assert replayed == in_turn + in_turn[:1]


def test_replay_is_refused_for_an_unbound_service_and_the_paths_warm_up_instead(
    live_server, samples, nacos
):
    samples.accept([TrafficSample(time.time(), "svc", "GET", "/svc/items/a", "10.0.0.7")])
    other = token("other")
    refused = httpx.get(
        f"{live_server.url}/api/v1/traffic-samples/replay/",
        params={"service": "svc"},
        headers={"Authorization": f"Token {other}"},
    )
    assert refused.status_code == 403
    with cold_instance(nacos, live_server.url, other, successes=3) as cold:
        registered(nacos, cold)
        assert cold.warmup_requests() == [("GET", FIXED, None)] * 3
        assert "the configured paths instead" in cold.log()


def test_with_no_samples_or_no_dashboard_the_paths_warm_up(live_server, samples, nacos):
    with cold_instance(nacos, live_server.url, token("svc"), successes=2) as cold:
        registered(nacos, cold)
        assert cold.warmup_requests() == [("GET", FIXED, None)] * 2
        assert "no samples in the window" in cold.log()
    unreachable = f"http://127.0.0.1:{free_port()}"
    with cold_instance(nacos, unreachable, token("svc"), successes=2) as cold:
        registered(nacos, cold)
        assert cold.warmup_requests() == [("GET", FIXED, None)] * 2
        assert "samples unavailable" in cold.log()
