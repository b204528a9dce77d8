import json

import httpx
import pytest
from prometheus_client import CollectorRegistry, generate_latest

from dataplane.gateway.metrics import Metrics
from dataplane.gateway.options import parse
from dataplane.gateway.reporter import SAMPLES_PATH, Reporter
from dataplane.gateway.sampling import BATCH, Sampler, SamplerCollector


def entry(n) -> dict:
    return {"n": n, "path": "/user-app/hello", "user": None, "city": None, "headers": {}}


def test_the_rate_and_the_cap_bound_what_is_sampled():
    now = [100.0]
    never, capped = Sampler(0.0, 1000), Sampler(1.0, 50, clock=lambda: now[0])
    assert sum(never.wants() for _ in range(1000)) == 0
    assert sum(capped.wants() for _ in range(1000)) == 50
    now[0] = 100.9
    assert not capped.wants()
    now[0] = 101.0
    assert sum(capped.wants() for _ in range(1000)) == 50
    tenth = sum(Sampler(0.1, 10**6).wants() for _ in range(20_000))
    assert 1600 < tenth < 2400  # 2000 expected, 42 the standard deviation


def test_a_full_buffer_drops_the_oldest_and_counts_them():
    sampler = Sampler(rate=1.0, cap=10, buffer=3)
    for n in range(5):
        sampler.record(entry(n))
    assert [s["n"] for s in sampler.waiting] == [2, 3, 4]
    assert sampler.dropped == 2
    batch = sampler.take()
    sampler.record(entry(5))
    sampler.record(entry(6))
    sampler.put_back(batch)  # room for one of the three: the newest of them stays
    assert [s["n"] for s in sampler.waiting] == [4, 5, 6]
    assert sampler.dropped == 4
    registry = CollectorRegistry()
    registry.register(SamplerCollector(sampler))
    exported = generate_latest(registry).decode()
    assert "graylane_gateway_samples_waiting 3.0" in exported
    assert "graylane_gateway_samples_dropped_total 4.0" in exported


def test_the_options_turn_sampling_off_or_set_it():
    base = ["--dashboard", "http://d", "--token", "t"]
    options = parse(base, environ={})
    assert (options.samples, options.sample_rate, options.sample_cap) == (True, 0.1, 200)
    options = parse(base, environ={"GATEWAY_SAMPLES": "false", "GATEWAY_SAMPLE_RATE": "1"})
    assert (options.samples, options.sample_rate) == (False, 1.0)
    with pytest.raises(SystemExit):
        parse([*base, "--sample-rate", "1.5"], environ={})


@pytest.mark.asyncio
async def test_samples_the_dashboard_could_not_take_are_sent_again_and_refused_ones_not():
    answers = [503, 202, 202, 400]
    posted: list[list[dict]] = []

    def dashboard(request: httpx.Request) -> httpx.Response:
        assert request.url.path == SAMPLES_PATH
        posted.append(json.loads(request.read())["samples"])
        return httpx.Response(answers.pop(0), json={})

    sampler = Sampler(rate=1.0, cap=10)
    for n in range(BATCH + 1):
        sampler.record(entry(n))
    async with httpx.AsyncClient(
        transport=httpx.MockTransport(dashboard), base_url="http://dashboard"
    ) as client:
        reporter = Reporter(
            client=client, metrics=Metrics(), name=lambda: "gw-1", interval=1, sampler=sampler
        )
        await reporter.report_samples(sampler)  # 503: the batch waits
        assert len(sampler.waiting) == BATCH + 1
        await reporter.report_samples(sampler)  # two batches taken
        assert not sampler.waiting
        sampler.record(entry("bad"))
        await reporter.report_samples(sampler)  # 400: dropped, not sent again
        assert not sampler.waiting
    assert [len(batch) for batch in posted] == [BATCH, BATCH, 1, 1]
    assert posted[0] == posted[1]


def test_a_batch_stays_under_the_dashboards_body_limit():
    sampler = Sampler(rate=1.0, cap=10)
    long = {"path": "/user-app/" + "x" * 8000, "user": None, "city": None, "headers": {}}
    for _ in range(50):
        sampler.record(long)
    batches = [sampler.take() for _ in range(3)]
    assert [len(batch) for batch in batches] == [19, 19, 12]
    assert all(len(json.dumps({"samples": batch})) < 256 * 1024 for batch in batches)


@pytest.mark.asyncio
async def test_a_batch_on_its_way_still_counts_as_waiting_until_the_dashboard_answers():
    """`samples_waiting 0` is what says every sample reached the dashboard: a batch taken
    but not yet answered must not read as sent."""
    sampler = Sampler(rate=1.0, cap=10)
    registry = CollectorRegistry()
    registry.register(SamplerCollector(sampler))
    seen_during_post: list[str] = []

    def dashboard(request: httpx.Request) -> httpx.Response:
        seen_during_post.append(generate_latest(registry).decode())
        return httpx.Response(202, json={})

    sampler.record(entry(1))
    sampler.record(entry(2))
    async with httpx.AsyncClient(
        transport=httpx.MockTransport(dashboard), base_url="http://dashboard"
    ) as client:
        reporter = Reporter(
            client=client, metrics=Metrics(), name=lambda: "gw-1", interval=1, sampler=sampler
        )
        await reporter.report_samples(sampler)
    assert "graylane_gateway_samples_waiting 2.0" in seen_during_post[0]
    assert "graylane_gateway_samples_waiting 0.0" in generate_latest(registry).decode()
