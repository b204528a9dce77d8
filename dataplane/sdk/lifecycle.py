"""Lossless startup and shutdown of one instance (docs/service-sdk.md), as an ASGI wrapper:

    app = Lifecycle(app, service="user-app", version="V1", port=7201, registry=naming_client,
                    reporter=..., warmups=[load_caches], replay=Replay(["/user-app/hello"]))

served by uvicorn with its lifespan on (`uvicorn.run(app, lifespan="on")`, or
`uvicorn --lifespan on module:app`); `from_env` builds it from the environment for a Django
project's `asgi.py` in one line.

Startup: once the port answers, the warm-up callables run, then the replay warm-up sends
recent sampled requests of its own service (`Replay(samples=SampleSource(...))`, from the
dashboard), else the configured paths, to the instance itself until N answer 2xx; only
then is the instance registered (serving). Nobody routes to an instance the registry does
not list, so no request meets a cold one.

Shutdown: SIGTERM (or SIGINT) is taken before uvicorn sees it. The instance is set
`enabled=false` in the registry (its heartbeats go on, so the registry keeps it disabled
rather than forgetting and relearning it), new requests are answered 503 with
`X-Instance-Shutting-Down: true` (callers retry elsewhere), and it waits until nothing is in
flight and no request came for `quiet_s` (callers have seen the change), or until `drain_s`
has passed. Then uvicorn's own graceful shutdown runs (close the port, finish connections),
and in the lifespan shutdown the heartbeats stop and the instance is deregistered, last.

`app_lifespan=True` also runs the wrapped app's own lifespan (Starlette, FastAPI, any app
that has one; Django's ASGI handler has none): its startup before ours, its shutdown after
the instance is deregistered.

`graceful=False` is the naive lifecycle of a service without the SDK, for comparison:
registered at once, and on SIGTERM uvicorn closes the port straight away.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import logging
import os
import signal
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from dataplane.registry_client import (
    Instance,
    NamingClient,
    Registration,
    RegistryError,
)

from .lifecycle_report import LifecycleReporter
from .replay_samples import (
    MAX_SAMPLES,
    SampleSource,
    SamplesUnavailable,
    WarmupRequest,
    fixed_requests,
)

log = logging.getLogger(__name__)

SHUTTING_DOWN_HEADER = "X-Instance-Shutting-Down"
WARMUP_HEADER = "X-Graylane-Warmup"
DEFAULT_DRAIN_S = 5.0
DEFAULT_QUIET_S = 0.5

Scope = dict[str, Any]
Warmup = Callable[[], Awaitable[Any] | Any]

_MARKER_BODY = b'{"error":"instance shutting down"}'
_MARKER_HEADERS = [
    (b"content-type", b"application/json"),
    (b"content-length", b"%d" % len(_MARKER_BODY)),
    (SHUTTING_DOWN_HEADER.lower().encode(), b"true"),
    (b"connection", b"close"),
    (b"retry-after", b"0"),
]


class AppLifespan:
    """The wrapped app's own lifespan, driven from ours through two queues."""

    def __init__(self, app: Callable[..., Awaitable[None]], scope: Scope):
        self.app, self.scope = app, scope
        self._to_app: asyncio.Queue[dict] = asyncio.Queue()
        self._from_app: asyncio.Queue[dict] = asyncio.Queue()
        self._task: asyncio.Task | None = None

    async def _step(self, message: str) -> None:
        await self._to_app.put({"type": f"lifespan.{message}"})
        assert self._task is not None
        answer = asyncio.create_task(self._from_app.get())
        await asyncio.wait([answer, self._task], return_when=asyncio.FIRST_COMPLETED)
        if not answer.done():
            answer.cancel()
            self._task.result()  # the app's lifespan raised: so does our startup
            raise RuntimeError(f"the app's lifespan ended without answering {message}")
        if answer.result()["type"] != f"lifespan.{message}.complete":
            raise RuntimeError(f"the app's {message} failed: {answer.result().get('message')}")

    async def startup(self) -> None:
        async def run() -> None:
            await self.app(self.scope, self._to_app.get, self._from_app.put)

        self._task = asyncio.create_task(run())
        await self._step("startup")

    async def shutdown(self) -> None:
        await self._step("shutdown")


@dataclass(frozen=True)
class Replay:
    """Replay warm-up: send requests (in turn) to the instance itself until `successes`
    answer 2xx, for at most `timeout_s`; they carry `X-Graylane-Warmup: true` and
    `headers`. The requests: up to `samples.limit` recent sampled ones of the service
    when `samples` is set and the dashboard has some, else GETs of `paths`."""

    paths: Sequence[str]
    successes: int = 10
    timeout_s: float = 30.0
    headers: Mapping[str, str] = field(default_factory=dict)
    samples: SampleSource | None = None


class Lifecycle:
    """ASGI wrapper; see the module docstring. `state`: starting, warming, serving, draining,
    drained or exited; `in_flight`: requests being served."""

    def __init__(
        self,
        app: Callable[..., Awaitable[None]],
        *,
        service: str,
        version: str,
        port: int,
        host: str = "127.0.0.1",
        registry: NamingClient | None = None,
        reporter: LifecycleReporter | None = None,
        warmups: Iterable[Warmup] = (),
        replay: Replay | None = None,
        drain_s: float = DEFAULT_DRAIN_S,
        quiet_s: float = DEFAULT_QUIET_S,
        graceful: bool = True,
        app_lifespan: bool = False,
        weight: float = 1.0,
        metadata: Mapping[str, str] | None = None,
    ):
        self.app = app
        self.service, self.version, self.host, self.port = service, version, host, port
        self.registry = registry
        self.reporter = reporter
        self.warmups = list(warmups)
        self.replay = replay
        self.drain_s, self.quiet_s = drain_s, quiet_s
        self.graceful = graceful
        self.app_lifespan = app_lifespan
        self._app_lifespan: AppLifespan | None = None
        self.instance = Instance(
            service=service,
            ip=host,
            port=port,
            weight=weight,
            metadata={**(metadata or {}), "version": version},
        )
        self.registration = Registration(registry, self.instance) if registry else None
        self.state = "starting"
        self.in_flight = 0
        self._last_arrival = 0.0
        self._started_at = time.monotonic()
        self._sequence: asyncio.Task | None = None
        self._drain: asyncio.Task | None = None
        self._previous_handlers: dict[int, Any] = {}

    # -- requests ------------------------------------------------------------------------------

    async def __call__(self, scope: Scope, receive, send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(scope, receive, send)
            return
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        self._last_arrival = time.monotonic()
        if self.state in ("draining", "drained", "exited"):
            await send({"type": "http.response.start", "status": 503, "headers": _MARKER_HEADERS})
            await send({"type": "http.response.body", "body": _MARKER_BODY})
            return
        self.in_flight += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.in_flight -= 1
            self._last_arrival = time.monotonic()

    # -- lifespan ------------------------------------------------------------------------------

    async def _lifespan(self, scope: Scope, receive, send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                if self.app_lifespan:
                    self._app_lifespan = AppLifespan(self.app, scope)
                    try:
                        await self._app_lifespan.startup()
                    except Exception as exc:
                        await send({"type": "lifespan.startup.failed", "message": repr(exc)})
                        return
                self._report("starting", graceful=self.graceful, version=self.version)
                if self.graceful:
                    self._take_signals()
                    self._sequence = asyncio.create_task(self._start_sequence())
                else:
                    self._sequence = asyncio.create_task(self._naive_start())
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self._stop()
                await send({"type": "lifespan.shutdown.complete"})
                return

    def _report(self, event: str, **detail: Any) -> None:
        detail["t_s"] = round(time.monotonic() - self._started_at, 3)
        if self.reporter is not None:
            self.reporter.report(event, **detail)
        log.info("%s %s:%s %s %s", self.service, self.host, self.port, event, detail)

    @property
    def _self_host(self) -> str:
        return "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host

    async def _port_answers(self) -> None:
        while True:
            try:
                _, writer = await asyncio.open_connection(self._self_host, self.port)
            except OSError:
                await asyncio.sleep(0.02)
                continue
            writer.close()
            return

    async def _start_sequence(self) -> None:
        await self._port_answers()
        self.state = "warming"
        began = time.monotonic()
        await self._warm_up()
        replayed, complete, source = await self._replay() if self.replay else (0, True, None)
        self._report(
            "warmed_up",
            warmup_s=round(time.monotonic() - began, 3),
            replayed=replayed,
            complete=complete,
            source=source,
        )
        await self._register()

    async def _naive_start(self) -> None:
        """Registered at once, warm or not, as a service without the SDK would be."""
        registering = asyncio.create_task(self._register())
        began = time.monotonic()
        await self._warm_up()
        self._report("warmed_up", warmup_s=round(time.monotonic() - began, 3))
        await registering

    async def _warm_up(self) -> None:
        for warmup in self.warmups:
            result = warmup()
            if inspect.isawaitable(result):
                await result

    async def _replay_requests(self) -> tuple[list[WarmupRequest], str]:
        """The sampled requests when there are some, else the configured paths (said once)."""
        assert self.replay is not None
        samples = self.replay.samples
        if samples is None:
            return fixed_requests(self.replay.paths), "paths"
        try:
            requests = await samples.fetch(self.service)
            why = "no samples in the window"
        except SamplesUnavailable as exc:
            requests, why = [], f"samples unavailable: {exc}"
        if requests:
            return requests, "samples"
        log.warning("replay warm-up of %s: %s; the configured paths instead", self.service, why)
        return fixed_requests(self.replay.paths), "paths"

    async def _replay(self) -> tuple[int, bool, str]:
        assert self.replay is not None
        replay = self.replay
        requests, source = await self._replay_requests()
        deadline = time.monotonic() + replay.timeout_s
        successes = attempt = 0
        base_url = f"http://{self._self_host}:{self.port}"
        async with httpx.AsyncClient(base_url=base_url, timeout=5.0) as client:
            while requests and successes < replay.successes and time.monotonic() < deadline:
                request = requests[attempt % len(requests)]
                attempt += 1
                headers = {**replay.headers, **request.headers, WARMUP_HEADER: "true"}
                try:
                    response = await client.request(request.method, request.path, headers=headers)
                except httpx.HTTPError as exc:
                    log.warning("replay warm-up %s %s: %r", request.method, request.path, exc)
                    await asyncio.sleep(0.1)
                    continue
                if response.is_success:
                    successes += 1
                else:
                    await asyncio.sleep(0.1)
        if successes < replay.successes:
            log.warning(
                "replay warm-up: %d of %d after %.0f s; registering anyway",
                successes,
                replay.successes,
                replay.timeout_s,
            )
        return successes, successes >= replay.successes, source

    async def _register(self) -> None:
        if self.registration is not None:
            self.registration.start()
            await self.registration.registered.wait()
            self._report("registered", registry=self.registry.server if self.registry else None)
        self.state = "serving"
        self._report("serving")

    # -- shutdown ------------------------------------------------------------------------------

    def _take_signals(self) -> None:
        """Stand in front of the server's handlers (uvicorn's), which run after the drain."""
        loop = asyncio.get_running_loop()

        def on_signal(sig: int, frame: Any) -> None:
            loop.call_soon_threadsafe(self._on_signal, sig, frame)

        for signum in (signal.SIGTERM, signal.SIGINT):
            self._previous_handlers[signum] = signal.signal(signum, on_signal)

    def _on_signal(self, sig: int, frame: Any) -> None:
        if self._drain is None:
            self._drain = asyncio.create_task(self._drain_then_exit(sig, frame))
        else:  # a second signal: no more waiting
            self._pass_on(sig, frame)

    def _pass_on(self, sig: int, frame: Any) -> None:
        previous = self._previous_handlers.get(sig)
        if callable(previous):
            previous(sig, frame)
        elif previous != signal.SIG_IGN:
            signal.signal(sig, signal.SIG_DFL)
            os.kill(os.getpid(), sig)

    async def _drain_then_exit(self, sig: int, frame: Any) -> None:
        began = time.monotonic()
        if self._sequence is not None and not self._sequence.done():
            self._sequence.cancel()  # still warming: it never joined, nothing to drain
        was_serving = self.state == "serving"
        self.state = "draining"
        self._report("draining", in_flight=self.in_flight, signal=signal.Signals(sig).name)
        if was_serving:
            await self._disable()
            deadline = began + self.drain_s
            while time.monotonic() < deadline:
                quiet = time.monotonic() - self._last_arrival >= self.quiet_s
                if self.in_flight == 0 and quiet:
                    break
                await asyncio.sleep(0.02)
        self.state = "drained"
        self._report(
            "drained", in_flight=self.in_flight, drain_s=round(time.monotonic() - began, 3)
        )
        self._pass_on(sig, frame)

    async def _disable(self) -> None:
        if self.registration is None or self.registry is None:
            return
        disabled = dataclasses.replace(self.instance, enabled=False)
        # A re-registration by the heartbeat loop must not enable it again.
        self.registration.instance = disabled
        try:
            await self.registry.update(disabled)
        except RegistryError as exc:
            log.warning("could not disable %s in the registry: %s", disabled, exc)

    async def _stop(self) -> None:
        if self._sequence is not None and not self._sequence.done():
            self._sequence.cancel()
            await asyncio.gather(self._sequence, return_exceptions=True)
        for signum, handler in self._previous_handlers.items():
            signal.signal(signum, handler)
        if self.registration is not None:
            await self.registration.stop()  # heartbeats stop, then deregister: last
        if self._app_lifespan is not None:
            await self._app_lifespan.shutdown()
        self.state = "exited"
        self._report("exited", in_flight=self.in_flight)
        if self.reporter is not None:
            await self.reporter.flush()
        if self.registry is not None:
            await self.registry.aclose()


def from_env(
    app: Callable[..., Awaitable[None]],
    *,
    warmups: Iterable[Warmup] = (),
    environ: Mapping[str, str] = os.environ,
) -> Lifecycle:
    """A Lifecycle configured by the environment (README: Configuration), for one line in an
    `asgi.py`: `application = from_env(get_asgi_application())`."""
    service, version = environ["GRAYLANE_SERVICE"], environ["GRAYLANE_VERSION"]
    host, port = environ.get("GRAYLANE_HOST", "127.0.0.1"), int(environ["GRAYLANE_PORT"])
    registry = None
    if environ.get("GRAYLANE_REGISTRY_URL"):
        registry = NamingClient(
            environ["GRAYLANE_REGISTRY_URL"],
            username=environ.get("REGISTRY_USERNAME") or None,
            password=environ.get("REGISTRY_PASSWORD") or None,
        )
    reporter = None
    if environ.get("GRAYLANE_DASHBOARD_URL") and environ.get("GRAYLANE_LIFECYCLE_TOKEN"):
        reporter = LifecycleReporter(
            environ["GRAYLANE_DASHBOARD_URL"],
            environ["GRAYLANE_LIFECYCLE_TOKEN"],
            service=service,
            host=host,
            port=port,
        )
    paths = [p for p in environ.get("GRAYLANE_WARMUP_PATHS", "").split(",") if p]
    samples = None
    limit = min(int(environ.get("GRAYLANE_WARMUP_SAMPLES", "0")), MAX_SAMPLES)
    if limit > 0 and environ.get("GRAYLANE_DASHBOARD_URL"):
        # The instance's one credential: a service token, bound to the service to read
        # its samples (`issue_token --service`).
        token = environ.get("GRAYLANE_LIFECYCLE_TOKEN", "")
        samples = SampleSource(environ["GRAYLANE_DASHBOARD_URL"], token, limit=limit)
    replay = Replay(
        paths,
        successes=int(environ.get("GRAYLANE_WARMUP_SUCCESSES", "10")),
        samples=samples,
    )
    return Lifecycle(
        app,
        service=service,
        version=version,
        host=host,
        port=port,
        registry=registry,
        reporter=reporter,
        warmups=warmups,
        replay=replay if paths or samples else None,
        drain_s=float(environ.get("GRAYLANE_DRAIN_S", DEFAULT_DRAIN_S)),
        graceful=environ.get("GRAYLANE_LIFECYCLE", "graceful") != "naive",
    )
