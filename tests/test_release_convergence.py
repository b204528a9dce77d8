"""Convergence-gated steps with real processes: a dashboard (uvicorn) whose beat runs the
analysis, and the Python gateway process. Held back (SIGSTOP) when a release starts, the
gateway does not ack the start's generation: the step is not applied and nothing is
analysed until it is let go; then the start's event carries the generation, acks and
propagation, the analysis counts only what came after the ack, and each advance waits for
the gateway again. Held back longer than RELEASE_CONVERGENCE_TIMEOUT, the release pauses
with `not_converged` naming it."""

import contextlib
import os
import signal
import tempfile
import time

import httpx
import pytest
from django.conf import settings
from django.db import connection

from testing.gateway_lab import OK
from testing.processes import AsgiServer, CeleryWorker, database_url, django_env
from testing.waiting import wait_until
from tests.test_release_e2e import Traffic, fleet_with, start_release, wait_for_state

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

TIMEOUT = 8  # RELEASE_CONVERGENCE_TIMEOUT of the dashboard under test
HELD = 4  # seconds the first test holds the gateway back: less than TIMEOUT


@pytest.fixture(scope="module")
def server(django_db_setup, django_db_blocker):
    """The dashboard with its jobs (as tests/test_release_e2e.py's) and a short timeout."""
    with tempfile.TemporaryDirectory() as var_dir:
        env = django_env(
            database_url(connection.settings_dict),
            IN_PROCESS_JOBS="true",
            GRAYLANE_VAR_DIR=var_dir,
            RELEASE_CONVERGENCE_TIMEOUT=str(TIMEOUT),
        )
        with AsgiServer(env) as dashboard:
            if settings.REDIS_URL:
                with CeleryWorker(env, beat=True):
                    yield dashboard
            else:
                yield dashboard


@contextlib.contextmanager
def held_back(gateway):
    """The gateway process stopped (it neither polls nor acks) until the block ends."""
    assert gateway.popen is not None
    os.kill(gateway.popen.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(gateway.popen.pid, signal.SIGCONT)


def in_sync_gateway(lab):
    """The lab's gateway, running the newest generation (so it fronts user-app)."""
    gateway = lab.start_gateway()
    wait_until(
        lambda: lab.gateway_row("gw-test")["status"] == "in_sync",
        what="the gateway to ack the fleet's generation",
    )
    return gateway


def events(release) -> list[dict]:
    """Oldest first."""
    answer = httpx.get(release["url"] + "/events/", headers=release["headers"])
    return list(reversed(answer.json()["results"]))


def test_a_step_waits_for_the_held_back_gateway_and_is_analysed_after_its_ack(lab):
    fleet_with(lab, OK)
    gateway = in_sync_gateway(lab)
    before = lab.gateway_row("gw-test")["acked_generation"]
    with held_back(gateway):
        release = start_release(lab)
        time.sleep(HELD)
        # The beat looked every second: the step waits, nothing is analysed.
        assert [event["kind"] for event in events(release)] == ["created"]
        body = httpx.get(release["url"] + "/", headers=release["headers"]).json()
        assert (body["state"], body["step"]) == ("running", 0)
        assert lab.gateway_row("gw-test")["acked_generation"] == before
        let_go = time.time()
    started = wait_until(
        lambda: next((e for e in events(release) if e["kind"] == "started"), None),
        what="the started event once the gateway acked",
    )
    detail = started["detail"]
    assert detail["generation"] > before
    assert (detail["acked"], detail["gateways"], detail["converged"]) == (1, 1, True)
    assert HELD * 1000 <= detail["propagation_ms"]["p50"] == detail["propagation_ms"]["max"]
    assert gateway.generation() >= detail["generation"]

    with Traffic(gateway):
        final = wait_for_state(release, {"rolled_back", "promoted", "failed", "paused"}, 90)
    assert final["state"] == "promoted", final
    timeline = events(release)
    first_analysis = next(e for e in timeline if e["kind"] in ("analysis", "insufficient_data"))
    assert timeline.index(first_analysis) > timeline.index(started)
    assert first_analysis["detail"]["window_start"] >= int(let_go)
    advanced = [e for e in timeline if e["kind"] == "advanced"]
    assert [e["step"] for e in advanced] == [1, 2]
    for event in advanced:
        figures = event["detail"]
        assert figures["generation"] > detail["generation"]
        assert (figures["acked"], figures["gateways"], figures["converged"]) == (1, 1, True)
        assert 0 <= figures["propagation_ms"]["p50"] <= figures["propagation_ms"]["max"]
        # The step's window starts at its ack, after the decision that routed it (made once
        # the window before had ended): not where that window ended.
        at = timeline.index(event)
        decided = [e for e in timeline[:at] if e["kind"] == "analysis"][-1]
        analysed = next(e for e in timeline[at:] if e["kind"] in ("analysis", "insufficient_data"))
        assert analysed["detail"]["window_start"] > decided["detail"]["window_end"]


def test_a_gateway_held_back_past_the_timeout_pauses_the_release_by_name(lab):
    fleet_with(lab, OK)
    gateway = in_sync_gateway(lab)
    with held_back(gateway):
        release = start_release(lab)
        paused = wait_for_state(release, {"paused"}, TIMEOUT + 10)
        assert paused["step"] == 0
    timed_out = events(release)[-1]
    assert timed_out["kind"] == "not_converged"
    assert timed_out["detail"]["not_acked"] == ["gw-test"]
    assert (timed_out["detail"]["acked"], timed_out["detail"]["gateways"]) == (0, 1)
    assert "gw-test" in timed_out["detail"]["reason"]
    # Let go and resumed, the step is applied and the release goes on.
    wait_until(lambda: lab.gateway_row("gw-test")["status"] == "in_sync", what="the ack")
    resumed = httpx.post(release["url"] + "/resume/", headers=release["headers"])
    assert resumed.status_code == 200, resumed.text
    started = wait_until(
        lambda: next((e for e in events(release) if e["kind"] == "started"), None),
        what="the started event after the resume",
    )
    assert (started["detail"]["acked"], started["detail"]["gateways"]) == (1, 1)
