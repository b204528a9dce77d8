"""nginx's configuration of a generation: a pure function of (Generation, Site).

The decision is made of nginx's own lookups, none of them linear in the list sizes:
`map` (hash tables) for the header rule and the users, `geo` (a radix tree) for the CIDRs,
the geoip2 module for cities, `split_clients` for the percent, the realip module for
trusted proxies; one more `map` turns the rule results into the flag. Where this differs
from routing_engine (the percent's hash above all) is said in docs/agent.md.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable

from dataplane.agent.ir import Generation, Rules, ServiceRoute
from dataplane.agent.site import Ranges, Site, local_ranges, trusted_ranges
from dataplane.gateway.limits import (
    HEADER_LIMIT,
    HEADERS_LIMIT,
    HEADERS_TOO_LARGE,
    REQUEST_LINE_LIMIT,
)

GEOIP2_MODULE = "/usr/lib/nginx/modules/ngx_http_geoip2_module.so"
TEMP_PATHS = ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
# map's special parameters: a user id spelled like one must be escaped.
_MAP_WORDS = frozenset(("default", "hostnames", "include", "volatile"))


def quote(text: str) -> str:
    """An nginx string literal: double-quoted, with `\\` and `"` escaped."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'


def _map_key(text: str) -> str:
    """A `map` source value matched as a plain string (never as a regex or a parameter)."""
    if text.startswith("~") or text in _MAP_WORDS:
        return quote("\\" + text)
    return quote(text)


def _cidrs(ranges: Ranges) -> Iterable[str]:
    v4, v6 = ranges
    for ranges_of_family, make in ((v4, ipaddress.IPv4Address), (v6, ipaddress.IPv6Address)):
        for first, last in ranges_of_family:
            for network in ipaddress.summarize_address_range(make(first), make(last)):
                yield str(network)


def _header_variable(name: str) -> str:
    return "$http_" + re.sub(r"[^a-z0-9]", "_", name.lower())


def _upstream(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", name)


def render_nginx(generation: Generation, site: Site) -> str:
    rules = generation.rules
    directory = site.directory
    out: list[str] = []
    emit = out.append
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
    emit("  map_hash_max_size 262144;")
    emit("  map_hash_bucket_size 512;")
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
        '"flag":"$graylane_flag","upstream":"$upstream_addr","status":"$status",'
        '"seconds":"$request_time"}\';'
    )
    emit(f"  access_log {site.access_log} graylane buffer=64k flush=1s if=$graylane_service;")
    trusted = list(_cidrs(trusted_ranges(site)))
    for cidr in trusted:
        emit(f"  set_real_ip_from {cidr};")
    if trusted:
        emit("  real_ip_header X-Forwarded-For;")
        emit("  real_ip_recursive on;")
    # The chain the instance sees: the client's, then the peer (as the Python gateway).
    emit("  map $http_x_forwarded_for $graylane_forwarded_for {")
    emit('    "" $realip_remote_addr;')
    emit('    default "$http_x_forwarded_for, $realip_remote_addr";')
    emit("  }")
    if rules.enabled:
        _rules(emit, rules, site, trusted)
        for index, route in enumerate(generation.routes):
            _flag(emit, rules, route, index)
        for index, route in enumerate(generation.routes):
            emit(f"  map $graylane_flag_{index} $graylane_pool_{index} {{")
            for name, target in route.pools.items():
                emit(f"    {name} {quote(_upstream(target) if target else '')};")
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
    emit("    set $graylane_service '';")
    emit("    set $graylane_flag '';")
    emit("    location = /-/readyz {")
    emit("      default_type text/plain;")
    emit(f"      return 200 'generation {generation.generation}\\n';")
    emit("    }")
    emit("    location / {")
    emit("      default_type application/json;")
    emit('      return 404 \'{"detail": "no such service"}\';')
    emit("    }")
    # nginx answers headers over the limits 400 (its 494, whose reason only its log says):
    # 431 here, as the other engines answer. A request line over them gets nginx's own 414
    # (an error page cannot lead a request without a parsed line to a location).
    emit("    error_page 494 =431 @headers_too_large;")
    emit("    location @headers_too_large {")
    emit("      default_type application/json;")
    emit(f'      return 431 \'{{"detail": "{HEADERS_TOO_LARGE}"}}\';')
    emit("    }")
    for index, route in enumerate(generation.routes):
        _location(emit, route, index, site, rules.enabled)
    emit("  }")
    emit("}")
    return "\n".join(out) + "\n"


def _rules(emit, rules: Rules, site: Site, trusted: list[str]) -> None:
    if rules.header_name:
        emit(f"  map {_header_variable(rules.header_name)} $graylane_by_header {{")
        emit("    default 0;")
        emit(f"    {quote('~^' + re.escape(rules.header_value) + '$')} 1;")
        emit("  }")
    if rules.v4 or rules.v6:
        emit("  geo $graylane_by_ip {")  # $remote_addr: the client, after realip
        emit("    default 0;")
        for cidr in _cidrs((rules.v4, rules.v6)):
            emit(f"    {cidr} 1;")
        emit("  }")
    if rules.cities:
        emit("  geo $graylane_local {")
        emit("    default 0;")
        for cidr in _cidrs(local_ranges()):
            emit(f"    {cidr} 1;")
        emit("  }")
        emit("  geo $realip_remote_addr $graylane_trusted {")
        emit("    default 0;")
        for cidr in trusted:
            emit(f"    {cidr} 1;")
        emit("  }")
        if site.geoip:
            emit(f"  geoip2 {site.geoip} {{")
            emit("    $graylane_geoip_city source=$remote_addr city names en;")
            emit("  }")
        geoip_city = "$graylane_geoip_city" if site.geoip else ""
        city_header = _header_variable(rules.city_header)
        # trusted|city header|local|GeoIP city -> the caller's city
        key = f"$graylane_trusted|{city_header}|$graylane_local|{geoip_city}"
        emit(f'  map "{key}" $graylane_city {{')
        emit('    "~^1\\|([^|]+)\\|" $1;')
        emit('    "~^.\\|[^|]*\\|1\\|" local;')
        emit('    "~^.\\|[^|]*\\|0\\|(.*)$" $1;')
        emit("  }")
        pattern = "~*^\\s*(?:" + "|".join(re.escape(city) for city in rules.cities) + ")\\s*$"
        emit("  map $graylane_city $graylane_by_city {")
        emit("    default 0;")
        emit(f"    {quote(pattern)} 1;")
        emit("  }")
    user = _header_variable(rules.user_header)
    if rules.users:
        emit(f"  map {user} $graylane_by_user {{")
        emit("    default 0;")
        for entry in rules.users:
            emit(f"    {_map_key(entry)} 1;")
        emit("  }")
    emit(f"  map {user} $graylane_has_user {{")
    emit('    "" 0;')
    emit("    default 1;")
    emit("  }")


def _flag(emit, rules: Rules, route: ServiceRoute, index: int) -> None:
    """$graylane_flag_<index>: the flag of requests to this service."""
    variable = f"$graylane_flag_{index}"
    if route.percent >= 100:
        emit(f"  map $graylane_has_user {variable} {{ default GRAY; }}")
        return
    targeted = [
        name
        for name, present in (
            ("header", bool(rules.header_name)),
            ("ip", bool(rules.v4 or rules.v6)),
            ("city", bool(rules.cities)),
            ("user", bool(rules.users)),
        )
        if present and route.targeted
    ]
    key = "".join(f"$graylane_by_{name}" for name in targeted)
    if route.percent:
        split = f"$graylane_split_{index}"
        salt = route.service + ":" if route.salted else ""
        emit(f'  split_clients "{salt}{_header_variable(rules.user_header)}" {split} {{')
        emit(f"    {route.percent}% 1;")
        emit("    * 0;")
        emit("  }")
        key += f"$graylane_has_user{split}"
        prod = ["0" * len(targeted) + tail for tail in ("00", "01", "10")]
    else:
        prod = ["0" * len(targeted)]
    if not key:
        emit(f"  map $graylane_has_user {variable} {{ default PROD; }}")
        return
    emit(f'  map "{key}" {variable} {{')
    emit("    default GRAY;")
    for value in prod:
        emit(f'    "{value}" PROD;')
    emit("  }")


def _location(emit, route: ServiceRoute, index: int, site: Site, enabled: bool) -> None:
    for match in (f"= {quote('/' + route.service)}", quote(f"/{route.service}/")):
        emit(f"    location {match} {{")
        emit(f"      set $graylane_service {quote(route.service)};")
        if enabled:
            emit(f"      set $graylane_flag $graylane_flag_{index};")
            pool = f"$graylane_pool_{index}"
        else:
            emit("      set $graylane_flag ALL;")
            pool = quote(_upstream(route.pools["ALL"])) if route.pools["ALL"] else '""'
        emit(f"      set $graylane_pool {pool};")
        emit('      if ($graylane_pool = "") {')
        emit('        return 503 \'{"detail": "no routable instance"}\';')
        emit("      }")
        emit("      proxy_pass http://$graylane_pool;")
        emit("      proxy_http_version 1.1;")
        emit('      proxy_set_header Connection "";')
        emit("      proxy_set_header Host $http_host;")
        emit("      proxy_set_header X-Gray-Status $graylane_flag;")
        # Empty: not passed on. A client's lane and versions would steer later SDK hops.
        emit('      proxy_set_header X-Gray-Lane "";')
        emit('      proxy_set_header X-Gray-Versions "";')
        emit("      proxy_set_header X-Forwarded-For $graylane_forwarded_for;")
        emit("      proxy_set_header X-Forwarded-Proto $scheme;")
        emit("      proxy_next_upstream error timeout http_503;")
        emit("      proxy_next_upstream_tries 3;")
        emit(f"      proxy_connect_timeout {site.connect_timeout:g}s;")
        emit(f"      proxy_read_timeout {site.request_timeout:g}s;")
        emit("    }")
