"""The gateway process: the proxy's server, its configuration client, the metric and sample
reporter and the housekeeping (the upstream pool's idle connections, the heap's free memory), on one
uvloop event loop."""

from __future__ import annotations

import asyncio
import gc
import logging
import platform
import signal

from dataplane.dashboards import dashboard_client
from dataplane.gateway import NOT_COMPILED
from dataplane.gateway.config_client import ConfigClient
from dataplane.gateway.heap import keep_giving_back_free_heap
from dataplane.gateway.metrics import Metrics
from dataplane.gateway.options import Options
from dataplane.gateway.proxy import ClientConnection, Context
from dataplane.gateway.reporter import Reporter
from dataplane.gateway.routing import RoutingTable
from dataplane.gateway.sampling import Sampler, SamplerCollector
from dataplane.gateway.shadow import Shadower
from dataplane.gateway.upstream import UpstreamPool
from routing_engine import CallerResolver

log = logging.getLogger("dataplane.gateway")

# The gateway's own pages. `/-/` cannot start a service's path (the dashboard's service
# names never start with "-"); `/metrics` is the conventional scrape path and serves the
# same page unless a service named `metrics` exists, which then owns it.
RESERVED_PREFIX = b"/-/"
TEXT = b"text/plain; charset=utf-8"
# The engine its acks name (the agent names envoy or nginx); its version, the interpreter's.
ENGINE = "python"


def admin_pages(metrics: Metrics):
    def page(path: bytes, table: RoutingTable | None) -> tuple[int, bytes, bytes] | None:
        if path in (b"/-/metrics", b"/metrics"):
            return 200, b"text/plain; version=0.0.4; charset=utf-8", metrics.prometheus_text()
        if path == b"/-/healthz":
            return 200, TEXT, b"ok\n"
        if path == b"/-/readyz":
            if table is None:
                return 503, TEXT, b"no configuration yet\n"
            return 200, TEXT, b"generation %d\n" % table.generation
        return None

    return page


async def serve(options: Options) -> None:
    loop = asyncio.get_running_loop()
    metrics = Metrics()
    sampling = options.samples and options.sample_rate > 0 and options.sample_cap > 0
    sampler = Sampler(options.sample_rate, options.sample_cap) if sampling else None
    if sampler is not None:
        metrics.registry.register(SamplerCollector(sampler))
    context = Context(
        table=None,
        pool=UpstreamPool(
            connect_timeout=options.connect_timeout,
            idle_timeout=options.upstream_idle_timeout,
            eject_after=options.eject_after,
            eject_seconds=options.eject_seconds,
        ),
        resolver=CallerResolver(options.trusted_proxies, options.geoip),
        metrics=metrics,
        request_timeout=options.request_timeout,
        idle_timeout=options.idle_timeout,
        admin=admin_pages(metrics),
        sampler=sampler,
        shadow=Shadower(timeout=options.request_timeout),
    )

    def install(table: RoutingTable) -> None:
        context.table = table
        # A table of 100k users and 10k CIDRs is a million long-lived objects; frozen, the
        # collector stops walking them in its full collections (as graylane/long_lived.py
        # does for the dashboard). Tables hold no reference cycles, so a replaced one is
        # still freed, by reference counting.
        gc.freeze()

    async with dashboard_client(options.dashboards, options.token) as client:
        config = ConfigClient(
            client=client,
            cache_file=options.cache_file,
            install=install,
            current=lambda: context.table,
            name=options.name,
            poll_wait=options.poll_wait,
            prod_fallback=options.prod_fallback,
            # What runs the configuration, as the agent says it of Envoy and nginx.
            ack_fields={"engine": ENGINE, "engine_version": platform.python_version()},
        )
        reporter = Reporter(
            client=client,
            metrics=metrics,
            name=lambda: config.name,
            interval=options.metrics_interval,
            sampler=sampler,
            shadow=context.shadow.stats,
        )
        await config.load_cache()
        server = await loop.create_server(
            lambda: ClientConnection(context),
            options.host,
            options.port,
            reuse_address=True,
            backlog=1024,
        )
        log.info(
            "Gateway listening on http://%s:%d/ (dashboards %s; request path %s)",
            options.host,
            options.port,
            ", ".join(options.dashboards),
            "compiled by mypyc" if NOT_COMPILED is None else f"as Python: {NOT_COMPILED}",
        )
        stop = asyncio.Event()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stop.set)
        tasks = [
            loop.create_task(config.run()),
            loop.create_task(reporter.run()),
            loop.create_task(_housekeeping(context.pool)),
            loop.create_task(keep_giving_back_free_heap()),
        ]
        await stop.wait()
        log.info("Gateway stopping.")
        server.close()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await context.shadow.close()
        context.pool.close_idle(older_than=0)
        context.resolver.close()


async def _housekeeping(pool: UpstreamPool) -> None:
    while True:
        await asyncio.sleep(1.0)
        pool.close_idle()
