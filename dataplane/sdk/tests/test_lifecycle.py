"""The lifecycle of one real instance process (uvicorn + dataplane.sdk.lifecycle) against the
Nacos contract fake: registered only once warm; on SIGTERM disabled first (still beating),
the shutting-down marker for new requests, the drain period honoured while requests keep
coming, deregistered last; and the configuration read from the environment."""

import asyncio
import signal
import sys
import threading
import time

import httpx
import pytest

from dataplane.sdk.lifecycle import SHUTTING_DOWN_HEADER, Lifecycle, from_env
from dataplane.sdk.replay_samples import SampleSource
from testing.fakes.nacos_fake import FakeNacos
from testing.processes import Process, free_port
from testing.waiting import async_wait_until, wait_until


class Instance(Process):
    def __init__(self, registry: str, *extra: str):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/svc"
        args = [sys.executable, "-m", "dataplane.sdk.tests.lifecycle_app", "--registry"]
        super().__init__([*args, registry, "--port", str(self.port), *extra], env=None)

    def is_ready(self) -> bool:
        try:
            return httpx.get(self.url + "/-/stats", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False


@pytest.fixture
def nacos():
    with FakeNacos() as fake:
        yield fake


@pytest.mark.slow
def test_registered_only_once_warm(nacos):
    with Instance(nacos.url, "--warmup-s", "1.5") as instance:
        began = time.monotonic()
        assert nacos.instance("svc", "127.0.0.1", instance.port) is None  # serving, not listed
        wait_until(lambda: nacos.instance("svc", "127.0.0.1", instance.port) is not None)
        assert time.monotonic() - began >= 1.0
        assert httpx.post(instance.url + "/work").status_code == 200  # warm when listed


@pytest.mark.slow
def test_sigterm_disables_then_drains_with_the_marker_then_deregisters(nacos):
    with Instance(nacos.url, "--drain-s", "2") as instance:
        wait_until(lambda: nacos.instance("svc", "127.0.0.1", instance.port) is not None)
        sent: list[tuple[float, float, httpx.Response]] = []  # (sent at, answered at, answer)

        def keep_calling() -> None:  # requests keep coming from before SIGTERM: never quiet
            while instance.popen.poll() is None:
                at = time.monotonic()
                try:
                    answer = httpx.post(instance.url + "/work", timeout=1)
                    sent.append((at, time.monotonic(), answer))
                except httpx.TransportError:
                    break  # the port is closed: uvicorn's own shutdown has begun
                time.sleep(0.02)

        caller = threading.Thread(target=keep_calling)
        caller.start()
        wait_until(lambda: len(sent) >= 3)
        sigterm_at = time.monotonic()
        instance.popen.send_signal(signal.SIGTERM)
        wait_until(lambda: not nacos.instance("svc", "127.0.0.1", instance.port).enabled)
        disabled_at = time.monotonic()
        instance.popen.wait(30)
        exited_after = time.monotonic() - sigterm_at
        caller.join(5)
    after = [answer for at, _, answer in sent if at > disabled_at]
    assert after and all(a.status_code == 503 for a in after)
    assert all(a.headers[SHUTTING_DOWN_HEADER] == "true" for a in after)
    assert all(a.headers["connection"] == "close" for a in after)
    # Sent before SIGTERM: served, unless the server only read it once shutting down (a
    # loaded machine delays a request that long); then it says so, and the caller retries.
    before = [(answer.status_code, answer.headers.get(SHUTTING_DOWN_HEADER), done > sigterm_at)
              for at, done, answer in sent if at < sigterm_at]  # fmt: skip
    assert all(status == 200 or (status == 503 and marked == "true" and late)
               for status, marked, late in before), before  # fmt: skip
    # On a starved machine the caller may pause longer than the quiet period (0.5 s): then
    # the instance rightly leaves early.
    times = [at for at, _, _ in sent]
    longest_pause = max(b - a for a, b in zip(times, times[1:], strict=False))
    assert exited_after < 10 * 2.0  # the drain period ends
    if longest_pause < 0.4:
        assert exited_after >= 2.0  # the whole drain period while requests kept coming
    assert nacos.instance("svc", "127.0.0.1", instance.port) is None  # deregistered last


@pytest.mark.slow
def test_an_idle_instance_leaves_as_soon_as_it_is_quiet(nacos):
    with Instance(nacos.url, "--drain-s", "20") as instance:
        wait_until(lambda: nacos.instance("svc", "127.0.0.1", instance.port) is not None)
        sigterm_at = time.monotonic()
        instance.popen.send_signal(signal.SIGTERM)
        instance.popen.wait(10)
        assert time.monotonic() - sigterm_at < 5.0


def test_from_env_configures_the_lifecycle():
    async def app(scope, receive, send):
        pass

    environ = {
        "GRAYLANE_SERVICE": "user-app",
        "GRAYLANE_VERSION": "V2",
        "GRAYLANE_PORT": "7202",
        "GRAYLANE_REGISTRY_URL": "http://127.0.0.1:8000/nacos",
        "REGISTRY_USERNAME": "fleet",
        "GRAYLANE_WARMUP_PATHS": "/user-app/hello,/user-app/items",
        "GRAYLANE_WARMUP_SUCCESSES": "3",
        "GRAYLANE_DRAIN_S": "8",
    }
    lifecycle = from_env(app, environ=environ)
    assert (lifecycle.service, lifecycle.version, lifecycle.port) == ("user-app", "V2", 7202)
    assert lifecycle.instance.metadata == {"version": "V2"}
    assert lifecycle.registry.server == "http://127.0.0.1:8000/nacos"
    assert lifecycle.replay.paths == ["/user-app/hello", "/user-app/items"]
    assert lifecycle.replay.successes == 3
    assert lifecycle.drain_s == 8.0 and lifecycle.graceful and lifecycle.reporter is None
    naive = from_env(app, environ={**environ, "GRAYLANE_LIFECYCLE": "naive"})
    assert not naive.graceful and naive.replay.paths
    assert lifecycle.replay.samples is None  # samples only when asked for
    bare = {k: environ[k] for k in ("GRAYLANE_SERVICE", "GRAYLANE_VERSION", "GRAYLANE_PORT")}
    assert from_env(app, environ=bare).registry is None
    sampled = {
        **bare,
        "GRAYLANE_DASHBOARD_URL": "http://127.0.0.1:8000",
        "GRAYLANE_LIFECYCLE_TOKEN": "key",
        "GRAYLANE_WARMUP_SAMPLES": "200",
    }
    replay = from_env(app, environ=sampled).replay  # no paths: the samples alone
    assert replay.samples == SampleSource("http://127.0.0.1:8000", "key", limit=200)
    assert replay.paths == [] and replay.successes == 10


def run_lifespan(lifecycle) -> list[str]:
    """Drive the lifespan protocol as uvicorn does: startup, then (if it worked) shutdown."""

    async def drive() -> list[str]:
        inbox: asyncio.Queue = asyncio.Queue()
        sent: list[str] = []

        async def send(message):
            sent.append(message["type"])

        await inbox.put({"type": "lifespan.startup"})
        task = asyncio.create_task(lifecycle({"type": "lifespan", "state": {}}, inbox.get, send))
        await async_wait_until(lambda: sent, what="the startup's answer")
        if sent == ["lifespan.startup.complete"]:
            await inbox.put({"type": "lifespan.shutdown"})
        await asyncio.wait_for(task, 5)
        return sent

    return asyncio.run(drive())


def test_the_wrapped_apps_own_lifespan_runs_inside_ours():
    steps = []

    async def app(scope, receive, send):
        assert scope["type"] == "lifespan"
        await receive()
        steps.append("app started")
        await send({"type": "lifespan.startup.complete"})
        await receive()
        steps.append("app stopped")
        await send({"type": "lifespan.shutdown.complete"})

    lifecycle = Lifecycle(app, service="svc", version="V1", port=1, graceful=False,
                          app_lifespan=True)  # fmt: skip
    assert run_lifespan(lifecycle) == ["lifespan.startup.complete", "lifespan.shutdown.complete"]
    assert steps == ["app started", "app stopped"]
    assert lifecycle.state == "exited"


def test_a_failing_app_startup_fails_ours():
    async def app(scope, receive, send):
        await receive()
        raise RuntimeError("no database")

    lifecycle = Lifecycle(app, service="svc", version="V1", port=1, app_lifespan=True)
    assert run_lifespan(lifecycle) == ["lifespan.startup.failed"]
