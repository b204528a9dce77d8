"""Lossless restarts through the real gateway (real processes, loopback HTTP): two instances
of a service behind `python -m dataplane.gateway`, 200 POST requests per second, and one
instance restarted as an orchestrator does it (SIGTERM to it, a replacement whose warm-up
takes 3 s started at once), under `wrk` over 8 keep-alive connections (about 300 requests
per second here). With the SDK's lifecycle no client request fails; with it off
(`--mode naive`) requests fail, so the mechanism, not luck, is what passes the first test.

POST, because the gateway may retry it only when the instance surely did not run it (a
refused connection, the shutting-down marker): the lifecycle has to make every leaving and
arriving instance say so in time.
"""

import time

import pytest

from testing.lossless_lab import Load

pytestmark = pytest.mark.slow

WARMUP_S = 3.0
LOAD_S = 12


def restart_under_load(lab, mode: str) -> dict:
    first, second = lab.instance(mode), lab.instance(mode)
    lab.wait_routed({first.port, second.port})
    load = Load(f"{lab.gateway.url}/svc/work", LOAD_S).start()
    time.sleep(1.5)  # the restart comes in the middle of the load, not before it
    first.terminate()
    replacement = lab.instance(mode, warmup_s=WARMUP_S)
    exit_code = first.wait(15)
    load_result = load.result()  # the replacement warmed up, joined and served meanwhile
    result = {
        "load": load_result,
        "exit_code": exit_code,
        "replacement": replacement.stats(),
        "first_port": first.port,
        "replacement_port": replacement.port,
        "first_events": lab.lifecycle(first.port),
        "replacement_events": lab.lifecycle(replacement.port),
    }
    lab.stop_instances()
    return result


@pytest.fixture(scope="module")
def graceful(lab):
    return restart_under_load(lab, "graceful")


def test_a_restart_under_load_fails_no_request(graceful):
    load = graceful["load"]
    assert load.requests > 0 and load.failed == 0, load
    assert graceful["exit_code"] in (0, -15)  # it ended by itself, within the drain period


def test_the_leaving_instance_reports_each_step_in_order(graceful):
    events = [row["event"] for row in graceful["first_events"]]
    assert events == [
        "starting", "warmed_up", "registered", "serving", "draining", "drained", "exited",
    ]  # fmt: skip
    drained = graceful["first_events"][5]
    assert drained["detail"]["in_flight"] == 0


def test_an_instance_warming_up_for_3_s_gets_no_request_before_it_is_warm(graceful):
    stats = graceful["replacement"]
    assert stats["cold"] == 0  # no request reached it while it was cold
    assert stats["served"] > 0, graceful  # and it did take traffic once warm
    events = {row["event"]: row for row in graceful["replacement_events"]}
    assert events["warmed_up"]["detail"]["warmup_s"] >= WARMUP_S, events
    assert events["warmed_up"]["at"] <= events["registered"]["at"]


def test_without_the_lifecycle_the_same_restart_fails_requests(lab):
    naive = restart_under_load(lab, "naive")
    assert naive["load"].failed > 0, naive["load"]
    assert naive["replacement"]["cold"] > 0  # it was sent requests before it was warm
