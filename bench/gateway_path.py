"""The Python gateway's own path per proxied request, counted by callgrind in one process:
a request head fed to a client connection (python -m dataplane.gateway's ClientConnection,
bench/gateway.py's document and request), decided, written to a kept-alive upstream
connection, and nginx's answer fed back and written to the client, with no sockets: the
transports are lists. What bench/gateway.py's `--counted` figure is less the kernel calls'
user-space side and the event loop's, and without its noise (the gateway's timers: a metrics
window each second, the reporter), so the same in every run to the instruction: the figure
to compare two versions of proxy.py and upstream.py by. Counted twice side by side: as the
gateway runs where `make install` compiled its path (mypyc, dataplane/gateway/compiled.py)
and as Python (GRAYLANE_PURE_PYTHON_GATEWAY=true, the fallback).

    .venv/bin/python bench/gateway_path.py [--requests 2000]

Latest figures: bench/README.md (gateway.py's section).
"""

from __future__ import annotations

import argparse
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import instructions  # noqa: E402
from dataplane.gateway import compiled  # noqa: E402

SETUP = """
import asyncio, json, types
import uvloop
from bench.gateway import HEADERS, gateway_document
from dataplane.gateway.metrics import Metrics
from dataplane.gateway.proxy import ClientConnection, Context
from dataplane.gateway.routing import RoutingTable
from dataplane.gateway.sampling import Sampler
from dataplane.gateway.upstream import UpstreamConnection, UpstreamPool
from routing_engine import CallerResolver

request = (
    "GET /user-app/hello HTTP/1.1\\r\\nHost: 127.0.0.1:8000\\r\\n"
    + "".join(header + "\\r\\n" for header in HEADERS) + "\\r\\n"
).encode()
answer = (
    b"HTTP/1.1 200 OK\\r\\nServer: nginx/1.22.1\\r\\nDate: Fri, 04 Dec 2026 04:00:00 GMT\\r\\n"
    b"Content-Type: application/json\\r\\nContent-Length: 16\\r\\n"
    b"Connection: keep-alive\\r\\n\\r\\n"
    b'{"version":"V1"}'
)
address = ("127.0.0.1", 9)
written = []
nothing = lambda *args: None

async def connected():
    # The gateway's defaults (app.py): samples at 0.1, its document (100,000 users, 20 lanes).
    table = RoutingTable.from_document(gateway_document(address[1], lanes=20))
    context = Context(
        table=table, pool=UpstreamPool(), resolver=CallerResolver(), metrics=Metrics(),
        request_timeout=30, idle_timeout=60, admin=lambda path, table: None,
        sampler=Sampler(0.1, 10**9),
    )
    upstream = UpstreamConnection(context.pool, address)
    upstream.connection_made(types.SimpleNamespace(
        write=written.append, close=nothing, pause_reading=nothing, resume_reading=nothing))
    context.pool.release(upstream)
    client = ClientConnection(context)
    client.connection_made(types.SimpleNamespace(
        write=written.append, get_extra_info=lambda name: ("127.0.0.1", 5555),
        pause_reading=nothing, resume_reading=nothing, close=nothing))
    return client, upstream

loop = uvloop.new_event_loop()
client, upstream = loop.run_until_complete(connected())
feed, answered, clear = client.data_received, upstream.data_received, written.clear

def proxied(request, answer):
    feed(request)
    answered(answer)
    clear()

def floor(request, answer):
    clear()

calls = [(request, answer)] * {requests}
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=2000)
    args = parser.parse_args()
    if (problem := instructions.available()) is not None:
        raise SystemExit(problem)
    kinds = {"python": {compiled.PURE_ENVIRONMENT: "true"}}
    if (reason := compiled.why_not_compiled()) is None:
        kinds["compiled"] = {compiled.PURE_ENVIRONMENT: "false"}
    else:
        print(f"the compiled path is left out: {reason}")
    setup = SETUP.replace("{requests}", str(args.requests))

    def count(environment: dict[str, str]) -> instructions.Counted:
        return instructions.per_call(
            setup, {"gateway": "proxied"}, args.requests, floor="floor", environment=environment
        )["gateway"]

    # One valgrind each, side by side (each is one thread).
    with ThreadPoolExecutor(len(kinds)) as threads:
        counted = dict(zip(kinds, threads.map(count, kinds.values()), strict=True))
    print(f"the gateway's path per proxied request, in process ({args.requests} requests):")
    for kind, figure in counted.items():
        print(
            f"  {kind:<9} {figure.instructions:>9,.0f} instructions  "
            f"{figure.ll_misses:5.1f} LL misses"
        )
    if "compiled" in counted:
        ratio = counted["compiled"].instructions / counted["python"].instructions
        print(f"compiled / python: {ratio:.2f}x")


if __name__ == "__main__":
    main()
