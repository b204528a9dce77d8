"""Django's HTTP requests under uvicorn: graylane/wsgi_in_asgi.py against the maintained
a2wsgi.WSGIMiddleware (same thread count), side by side in one run.

Run:  .venv/bin/pip install -r requirements-dev.txt   # a2wsgi; wrk: apt-get install wrk
      .venv/bin/python bench/wsgi_in_asgi.py [--runs 3] [--seconds 4] [--requests 20000]
                                             [--no-server]

Two measurements, each repeated `--runs` times with the order of the two swapped every run:

1. the adapter alone: 8 concurrent requests at a time to a WSGI app that answers "ok" at
   once, driven on one event loop in this process; process CPU per request and requests/s.
2. uvicorn serving graylane.asgi (with a2wsgi's middleware in place of WsgiInAsgi, or
   not: bench/stock.py) on a fresh SQLite database, loaded by `wrk -t1 -c8` (Debian's `wrk`; skipped
   without it) on `/healthz`, the login page and an authenticated API read; server CPU per
   request and requests/s.

Medians (measure.percentile's p50) are printed last, with the ratio a2wsgi / ours (CPU per
request: above 1 means a2wsgi costs more).
Latest figures: bench/README.md.
"""

import argparse
import asyncio
import contextlib
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.measure import Clock, percentile, session_cpu_seconds  # noqa: E402
from bench.servers import WRK_MISSING, serve, template_database, wrk  # noqa: E402

MODES = ("ours", "a2wsgi")
THREADS = 16  # WEB_THREADS' default


def wrap(mode: str, wsgi_app, threads: int):
    if mode == "a2wsgi":
        from bench.stock import a2wsgi_in_asgi

        return a2wsgi_in_asgi(wsgi_app, threads)
    from graylane.wsgi_in_asgi import WsgiInAsgi

    return WsgiInAsgi(wsgi_app, threads)


# 1. The adapter alone.


def ok_app(environ, start_response):
    """Answers as Django's WSGI handler does, with a response object that closes."""
    from django.http import HttpResponse

    response = HttpResponse(b"ok", content_type="text/plain")
    start_response("200 OK", list(response.items()))
    return response


# `GET /healthz` as uvicorn's httptools protocol hands it to the app (its keys, its order).
SCOPE = {
    "type": "http",
    "asgi": {"version": "3.0", "spec_version": "2.3"},
    "http_version": "1.1",
    "server": ("127.0.0.1", 8000),
    "client": ("127.0.0.1", 50000),
    "scheme": "http",
    "root_path": "",
    "headers": [(b"host", b"127.0.0.1:8000"), (b"accept", b"*/*")],
    "state": {},
    "method": "GET",
    "path": "/healthz",
    "raw_path": b"/healthz",
    "query_string": b"",
}


async def adapter_round(app, requests: int, concurrency: int = 8) -> None:
    async def receive():
        return {"type": "http.request", "body": b""}

    async def send(message):
        pass

    async def client(count: int):
        for _ in range(count):
            await app(SCOPE, receive, send)

    await asyncio.gather(*(client(requests // concurrency) for _ in range(concurrency)))


def measure_adapter(mode: str, requests: int) -> tuple[float, float]:
    """(requests/s, µs of process CPU per request)."""
    import uvloop

    loop = uvloop.new_event_loop()
    app = wrap(mode, ok_app, THREADS)
    loop.run_until_complete(adapter_round(app, 800))  # warm up: threads started
    start = Clock.now()
    loop.run_until_complete(adapter_round(app, requests))
    elapsed = Clock.now().since(start)
    loop.close()
    app.executor.shutdown()
    return requests / elapsed.wall, elapsed.cpu / requests * 1e6


# 2. uvicorn serving Django, loaded by wrk.


def measure_server(mode: str, template: Path, pages, seconds: int) -> dict[str, tuple]:
    """{path: (requests/s, µs of the server's CPU per request)}, on a copy of `template`."""
    results = {}
    stock = "a2wsgi" if mode == "a2wsgi" else ""
    with serve("bench.stock:asgi_app", template, BENCH_STOCK=stock) as server:
        for path, header in pages:
            wrk(server.url + path, 1, header)  # warm up
        for path, header in pages:
            before = session_cpu_seconds(server.pid)
            count = wrk(server.url + path, seconds, header)
            used = session_cpu_seconds(server.pid) - before
            results[path] = (count / seconds, used / count * 1e6)
    return results


def record(table, run: int, mode: str, results: dict[str, tuple[float, float]]) -> None:
    """Into table[(what, mode)], and printed: each (requests/s, µs CPU/request) of `results`."""
    for what, (rps, us) in results.items():
        table.setdefault((what, mode), []).append((rps, us))
        print(f"run {run} {mode:6s} {what:16s} {rps:7.0f} req/s {us:6.0f} µs CPU/req", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=4, help="wrk duration per page")
    parser.add_argument("--requests", type=int, default=20000, help="adapter-only requests")
    parser.add_argument("--no-server", action="store_true", help="the adapter alone")
    args = parser.parse_args()
    try:
        import a2wsgi  # noqa: F401
    except ImportError:
        sys.exit("a2wsgi is not installed: .venv/bin/pip install -r requirements-dev.txt")
    from django.conf import settings

    settings.configure()  # the adapter reads FILE_UPLOAD_MAX_MEMORY_SIZE (the servers: real ones)
    server = not args.no_server and shutil.which("wrk") is not None
    if not args.no_server and not server:
        print(f"{WRK_MISSING}: the adapter alone")
    table: dict[tuple[str, str], list[tuple[float, float]]] = {}
    with contextlib.ExitStack() as stack:
        if server:
            template, token = stack.enter_context(template_database())
            pages = [
                ("/healthz", None),
                ("/accounts/login/", None),
                ("/api/v1/policy/", f"Authorization: Token {token}"),
            ]
        for run in range(1, args.runs + 1):
            for mode in MODES if run % 2 else MODES[::-1]:
                record(table, run, mode, {"adapter alone": measure_adapter(mode, args.requests)})
                if server:
                    record(table, run, mode, measure_server(mode, template, pages, args.seconds))
    print(f"medians of {args.runs} runs:")
    for what in dict.fromkeys(key[0] for key in table):
        median = {
            mode: tuple(percentile([v[i] for v in table[(what, mode)]], 50) for i in (0, 1))
            for mode in MODES
        }
        (ours_rps, ours_us), (lib_rps, lib_us) = median["ours"], median["a2wsgi"]
        print(
            f"  {what:16s} ours {ours_rps:6.0f} req/s {ours_us:5.0f} µs/req | a2wsgi "
            f"{lib_rps:6.0f} req/s {lib_us:5.0f} µs/req | ratio a2wsgi/ours: req/s "
            f"{lib_rps / ours_rps:.2f}, CPU/req {lib_us / ours_us:.2f}"
        )


if __name__ == "__main__":
    main()
