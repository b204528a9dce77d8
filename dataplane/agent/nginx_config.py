"""nginx's configuration of a generation: a pure function of (Generation, Site), and the
Lua file it loads (lua_data.lua_source: decide.lua, the decider Envoy runs too).

The decision is made by lua-nginx-module (Debian's libnginx-mod-http-lua and
lua-resty-core) in the access phase, with the same code and data as Envoy's Lua filter: the
engine's CRC-32 buckets, the Python gateway's trusted-proxy rule, its route headers and
baggage. The data is indexed once, in the master (`init_by_lua`), and the workers share it.
The geoip2 module looks up the client's city when the decision asks for it.
"""

from __future__ import annotations

import re
from pathlib import Path

from dataplane.agent.ir import Generation
from dataplane.agent.lua_data import lua_source
from dataplane.agent.samples import NGINX_FORMAT
from dataplane.agent.site import Site
from dataplane.gateway.limits import (
    HEADER_LIMIT,
    HEADERS_LIMIT,
    HEADERS_TOO_LARGE,
    REQUEST_LINE_LIMIT,
)

MODULES = Path("/usr/lib/nginx/modules")
GEOIP2_MODULE = MODULES / "ngx_http_geoip2_module.so"
# lua-nginx-module needs the development kit loaded before it.
LUA_MODULES = (MODULES / "ndk_http_module.so", MODULES / "ngx_http_lua_module.so")
LUA_PACKAGES = "/usr/share/lua/5.1/?.lua"  # lua-resty-core, which the module requires
RESTY_CORE = Path("/usr/share/lua/5.1/resty/core.lua")
LUA_MISSING = (
    "nginx lacks what the agent loads ({path}): apt-get install libnginx-mod-http-lua "
    "lua-resty-core (and libnginx-mod-http-geoip2 for --geoip)"
)
TEMP_PATHS = ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")


def lua_file(generation: Generation, site: Site) -> Path:
    return site.directory / f"graylane-{generation.generation}.lua"


def render_lua(generation: Generation, site: Site) -> str:
    return lua_source(generation, site, "nginx")


def missing_modules(site: Site) -> list[Path]:
    """What this site's nginx.conf loads and is not installed."""
    wanted = [*LUA_MODULES, RESTY_CORE, *([GEOIP2_MODULE] if site.geoip else [])]
    return [path for path in wanted if not path.exists()]


def quote(text: str) -> str:
    """An nginx string literal: double-quoted, with `\\` and `"` escaped."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'


def _upstream(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", name)


def render_nginx(generation: Generation, site: Site) -> str:
    directory = site.directory
    out: list[str] = []
    emit = out.append
    for module in LUA_MODULES:
        emit(f"load_module {module};")
    if site.geoip:
        emit(f"load_module {GEOIP2_MODULE};")
    emit(f"# Graylane generation {generation.generation} (revision {generation.revision})")
    emit("daemon off;")  # the agent runs the master as its child
    emit("master_process on;")
    emit(f"pid {directory / 'nginx.pid'};")
    emit(f"error_log {directory / 'error.log'} warn;")
    emit(f"worker_processes {site.workers or 'auto'};")
    emit(f"worker_shutdown_timeout {site.worker_shutdown_timeout:g}s;")
    emit("events { worker_connections 4096; }")
    emit("http {")
    for kind in TEMP_PATHS:
        emit(f"  {kind}_temp_path {directory / kind};")
    emit("  keepalive_requests 100000;")
    # No body limit (nginx's default is 1 MiB): the Python gateway and Envoy take any size.
    # Bodies up to 2 MiB are held in memory (and so retried on another instance); larger
    # ones go to <workdir>/client_body, which nginx's workers must be able to write.
    emit("  client_max_body_size 0;")
    emit("  client_body_buffer_size 2m;")
    # The head's lines in 8 KiB buffers, 64 KiB of them: a longer line is refused (a request
    # line 414, a header 494, answered 431 below), and so is a head that fills them all.
    line_buffer = max(REQUEST_LINE_LIMIT, HEADER_LIMIT)
    emit(f"  large_client_header_buffers {HEADERS_LIMIT // line_buffer} {line_buffer >> 10}k;")
    emit(
        '  log_format graylane escape=json \'{"service":"$graylane_service",'
        '"flag":"$graylane_flag","lane":"$graylane_lane","upstream":"$upstream_addr",'
        '"status":"$status","seconds":"$request_time"}\';'
    )
    emit(f"  access_log {site.access_log} graylane buffer=64k flush=1s if=$graylane_service;")
    if site.sample_rate:  # the requests decide.lua sampled (samples.py)
        emit(f"  log_format graylane_sample escape=json '{NGINX_FORMAT}';")
        sampled = "buffer=16k flush=1s if=$graylane_sample"
        emit(f"  access_log {site.sample_log} graylane_sample {sampled};")
    emit(f'  lua_package_path "{LUA_PACKAGES};;";')
    # Run in the master at each (re)load, so the workers share the indexed data.
    emit(f"  init_by_lua_block {{ graylane = dofile({quote(str(lua_file(generation, site)))}) }}")
    if site.geoip:
        emit(f"  geoip2 {site.geoip} {{")
        emit("    $graylane_geoip_city source=$graylane_client_ip city names en;")
        emit("  }")
    for pool in generation.pools:
        emit(f"  upstream {_upstream(pool.name)} {{")
        for endpoint in pool.endpoints:
            host = f"[{endpoint.host}]" if ":" in endpoint.host else endpoint.host
            emit(f"    server {host}:{endpoint.port} weight={endpoint.weight} max_fails=0;")
        emit("    keepalive 64;")
        emit("  }")
    emit("  server {")
    emit(f"    listen {site.listen};")
    sample = ("sample",) if site.sample_rate else ()
    for variable in ("service", "flag", "lane", "pool", "client_ip", *sample):
        emit(f"    set $graylane_{variable} '';")
    emit("    location = /-/readyz {")
    emit("      default_type text/plain;")
    emit(f"      return 200 'generation {generation.generation}\\n';")
    emit("    }")
    # nginx answers headers over the limits 400 (its 494, whose reason only its log says):
    # 431 here, as the other engines answer. A request line over them gets nginx's own 414
    # (an error page cannot lead a request without a parsed line to a location).
    emit("    error_page 494 =431 @headers_too_large;")
    emit("    location @headers_too_large {")
    emit("      default_type application/json;")
    emit(f'      return 431 \'{{"detail": "{HEADERS_TOO_LARGE}"}}\';')
    emit("    }")
    emit("    location / {")
    # The decision: the pool, or the answer (404 for no such service, 503 for no instance).
    emit("      access_by_lua_block { graylane.access() }")
    emit("      proxy_pass http://$graylane_pool;")
    emit("      proxy_http_version 1.1;")
    emit('      proxy_set_header Connection "";')
    emit("      proxy_set_header Host $http_host;")
    emit("      proxy_set_header X-Forwarded-Proto $scheme;")
    emit("      proxy_next_upstream error timeout http_503;")
    emit("      proxy_next_upstream_tries 3;")
    emit(f"      proxy_connect_timeout {site.connect_timeout:g}s;")
    emit(f"      proxy_read_timeout {site.request_timeout:g}s;")
    emit("    }")
    emit("  }")
    emit("}")
    return "\n".join(out) + "\n"
