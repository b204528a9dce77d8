"""The stock alternatives to the hand-written pieces on the publish -> ack path, put in their
place inside a Graylane process (the ASGI server, the celery worker) for a bench to judge:

  a2wsgi         a2wsgi.WSGIMiddleware (same thread count) instead of graylane/wsgi_in_asgi.py
                 for Django's HTTP requests (the publish itself; the gateway endpoints are
                 served straight from ASGI either way, gateways/protocol/asgi.py)
  aiohttp        pushes over an aiohttp ClientSession with a kept-alive connector instead of
                 gateways/push.py's own client (asyncio protocol + httptools)
  kombu-polling  kombu's own in-memory transport, which polls its queues every
                 `polling_interval` seconds (kombu's default: 1 s), instead of
                 graylane/memory_broker.py's, woken when a task is queued (the default mode
                 only: with Redis the broker is kombu's Redis transport either way)
  no-gc-freeze   no gc.freeze() once started and once warmed up (graylane/long_lived.py)

The process learns which from its environment: BENCH_STOCK (names, comma-separated) and
BENCH_POLLING_INTERVAL. Entry points: `bench.stock:asgi_app` (uvicorn --factory) and
`bench.stock_worker` (celery -A). On SIGUSR2 a process prints what runs in it (a line
starting with REPORT_PREFIX, then JSON: `report_line`), so that a bench can show that the
swap took effect rather than assume it: the HTTP adapter's class, how many pushes aiohttp
made, the broker's transport and its polling interval, how many objects gc.freeze() holds.
(On a signal, not on exit: uvicorn ends by raising the SIGTERM it caught again, so no exit
handler runs. Neither uvicorn nor a celery worker uses SIGUSR2.)
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import signal
import threading

PIECES = ("a2wsgi", "aiohttp", "kombu-polling", "no-gc-freeze")
SERVER_ONLY = ("a2wsgi",)  # the worker serves no HTTP
DEFAULT_MODE_ONLY = ("kombu-polling",)  # with Redis there is no in-memory broker
REPORT_PREFIX = "bench.stock ran: "
REPORT_SIGNAL = signal.SIGUSR2

_in_place: dict[str, object] = {}


def chosen() -> list[str]:
    names = [name for name in os.environ.get("BENCH_STOCK", "").split(",") if name]
    unknown = sorted(set(names) - set(PIECES))
    if unknown:
        raise SystemExit(f"BENCH_STOCK: unknown {', '.join(unknown)} (known: {', '.join(PIECES)})")
    return names


def install(names: list[str]) -> None:
    """Django set up, and the stock alternatives `names` in place of ours: before
    graylane.asgi is imported or a worker starts (they bind what they use when imported)."""
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "graylane.settings")
    django.setup(set_prefix=False)  # as graylane.asgi does
    if "a2wsgi" in names:
        _use_a2wsgi()
    if "aiohttp" in names:
        _use_aiohttp_pushes()
    if "kombu-polling" in names:
        _use_polled_memory_transport(float(os.environ.get("BENCH_POLLING_INTERVAL", "1.0")))
    if "no-gc-freeze" in names:
        _use_no_gc_freeze()
    signal.signal(REPORT_SIGNAL, lambda *_: print(REPORT_PREFIX + report_line(), flush=True))


def asgi_app():
    """uvicorn --factory: graylane.asgi's application, BENCH_STOCK's alternatives in place."""
    install(chosen())
    from graylane.asgi import application

    return application


def report_line() -> str:
    """What ran in this process, as JSON."""
    from graylane.celery import app

    transport = app.connection().transport
    pushes = _in_place.get("aiohttp")
    return json.dumps(
        {
            "pid": os.getpid(),
            "http_adapter": _in_place.get("a2wsgi", "graylane.wsgi_in_asgi.WsgiInAsgi"),
            "aiohttp_pushes": pushes.count if isinstance(pushes, AiohttpPushes) else None,
            "broker": f"{type(transport).__module__}.{type(transport).__name__}",
            "polling_interval": getattr(transport, "polling_interval", None),
            "gc_frozen_objects": gc.get_freeze_count(),
        }
    )


def a2wsgi_in_asgi(wsgi_app, threads: int):
    """a2wsgi's stand-in for graylane.wsgi_in_asgi.WsgiInAsgi(wsgi_app, threads)."""
    from a2wsgi import WSGIMiddleware

    _in_place["a2wsgi"] = "a2wsgi.WSGIMiddleware"
    return WSGIMiddleware(wsgi_app, workers=threads)


def _use_a2wsgi() -> None:
    import graylane.wsgi_in_asgi

    graylane.wsgi_in_asgi.WsgiInAsgi = a2wsgi_in_asgi  # type: ignore[assignment,misc]


def _use_aiohttp_pushes() -> None:
    import gateways.delivery

    pushes = AiohttpPushes()
    _in_place["aiohttp"] = pushes
    # gateways.delivery imported both names from gateways/push.py.
    gateways.delivery.event_loop = pushes.event_loop  # type: ignore[assignment]
    gateways.delivery.push = pushes.push  # type: ignore[assignment]


def _use_polled_memory_transport(interval: float) -> None:
    from graylane.celery import app

    if app.conf.broker_url:
        raise SystemExit("kombu-polling replaces the in-memory broker: run it without Redis")
    app.conf.broker_transport = "memory"
    app.conf.broker_transport_options = {
        **app.conf.broker_transport_options,
        "polling_interval": interval,
    }


def _use_no_gc_freeze() -> None:
    import graylane.celery
    import graylane.long_lived

    def not_frozen() -> None:
        pass

    # graylane.asgi imports it later (it sees this one); graylane.celery already holds it.
    graylane.long_lived.freeze_after_start = not_frozen
    graylane.celery.freeze_after_start = not_frozen  # type: ignore[attr-defined]


class AiohttpPushes:
    """gateways/push.py's `event_loop()` and `push()` over aiohttp: a uvloop loop per thread
    with one ClientSession on it (a kept-alive connector without a connection limit: the
    caller bounds concurrency, as gateways.delivery does), signing, timeout, errors and
    answer as gateways/push.py's push()."""

    def __init__(self):
        self._local = threading.local()
        self._lock = threading.Lock()
        self.count = 0  # pushes answered 2xx (a bench's proof that this client ran)

    def event_loop(self) -> asyncio.AbstractEventLoop:
        if getattr(self._local, "loop", None) is None:
            import uvloop

            self._local.loop, self._local.session = uvloop.new_event_loop(), None
        return self._local.loop

    async def push(self, gateway, snapshot) -> int:
        import aiohttp
        from django.conf import settings

        from gateways.errors import DeliveryError
        from gateways.push import signed_headers

        if self._local.session is None:  # made on the running loop
            self._local.session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=None),
                connector=aiohttp.TCPConnector(limit=0),
            )
        try:
            async with asyncio.timeout(settings.GATEWAY_PUSH_TIMEOUT):
                async with self._local.session.post(
                    gateway.endpoint, data=snapshot.body, headers=signed_headers(gateway, snapshot)
                ) as response:
                    status, answer = response.status, await response.read()
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            raise DeliveryError(f"POST {gateway.endpoint}: {type(exc).__name__}: {exc}") from exc
        if not 200 <= status < 300:
            raise DeliveryError(f"POST {gateway.endpoint} -> HTTP {status}")
        with self._lock:  # deliveries run on several worker threads
            self.count += 1
        return json.loads(answer)["generation"]

    def close(self) -> None:
        """This thread's session closed (its loop stays the caller's)."""
        if getattr(self._local, "session", None) is not None:
            self._local.loop.run_until_complete(self._local.session.close())
            self._local.session = None
