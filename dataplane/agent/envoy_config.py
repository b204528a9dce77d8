"""Envoy's configuration of a generation: pure functions of (Generation, Site).

* The bootstrap (written once when Envoy starts) holds a static listener whose HTTP
  connection manager takes its routes from a file (RDS, `path_config_source`), and the
  clusters from another file (CDS). The listener never changes, so no connection is
  drained when a generation is applied.
* CDS: one cluster per (service, version), `<service>.<version>`, and one per service
  with every version, `<service>` (the `ALL` flag).
* RDS: the decision is a Lua filter whose code and data come with the route configuration
  (decide.lua, with the generation's rules as tables); it sets `X-Gray-Status` (replacing a
  client's) and the pool header that the route's `cluster_header` follows.
* The limits of a request head (dataplane/gateway/limits.py): the connection manager counts
  the headers and their bytes (431), the Lua filter measures the request line (414). Envoy
  has no limit of one header (docs/agent.md says why the filter does not measure each).
"""

from __future__ import annotations

import ipaddress
import json
from importlib import resources
from typing import Any

from dataplane.agent.ir import Generation
from dataplane.agent.site import Ranges, Site, local_ranges, trusted_ranges
from dataplane.gateway.limits import (
    HEADER_COUNT_LIMIT,
    HEADERS_LIMIT,
    LINE_TOO_LONG,
    REQUEST_LINE_LIMIT,
)
from routing_engine import service_seed

ROUTE_CONFIG = "graylane"
POOL_HEADER = "x-graylane-pool"
GEO_HEADER = "x-graylane-geoip-city"
SHUTTING_DOWN_HEADER = "x-instance-shutting-down"
IDEMPOTENT = ("GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE")
LUA = "envoy.filters.http.lua"
LUA_PER_ROUTE = "type.googleapis.com/envoy.extensions.filters.http.lua.v3.LuaPerRoute"
ACCESS_LOG_FORMAT = {
    # The service is the path's first segment (the agent reads it from the path): cheaper
    # than dynamic metadata set by the Lua filter, which cost Envoy 10 % of its throughput.
    "path": "%REQ(:PATH)%",
    "flag": "%REQ(X-GRAY-STATUS)%",
    "upstream": "%UPSTREAM_HOST%",
    "status": "%RESPONSE_CODE%",
    # Microseconds: %DURATION% is whole milliseconds, too coarse for a loopback p95.
    "us": "%COMMON_DURATION(DS_RX_BEG:DS_TX_END:us)%",
    "flags": "%RESPONSE_FLAGS%",
}


def _typed(kind: str, body: dict) -> dict:
    return {"@type": f"type.googleapis.com/{kind}", **body}


def bootstrap(site: Site) -> dict[str, Any]:
    """The static part: admin, the listener, and where the dynamic parts are read from."""
    http_filters: list[dict] = []
    if site.geoip:
        http_filters += [
            {  # a client must not name its own GeoIP city
                "name": "graylane.strip_geoip",
                "typed_config": _typed(
                    "envoy.extensions.filters.http.header_mutation.v3.HeaderMutation",
                    {"mutations": {"request_mutations": [{"remove": GEO_HEADER}]}},
                ),
            },
            {
                "name": "envoy.filters.http.geoip",
                "typed_config": _typed(
                    "envoy.extensions.filters.http.geoip.v3.Geoip",
                    {
                        "provider": {
                            "name": "envoy.geoip_providers.maxmind",
                            "typed_config": _typed(
                                "envoy.extensions.geoip_providers.maxmind.v3.MaxMindConfig",
                                {
                                    "city_db_path": site.geoip,
                                    "common_provider_config": {
                                        "geo_headers_to_add": {"city": GEO_HEADER}
                                    },
                                },
                            ),
                        }
                    },
                ),
            },
        ]
    http_filters += [
        {
            "name": LUA,
            "typed_config": _typed(
                "envoy.extensions.filters.http.lua.v3.Lua",
                {"default_source_code": {"inline_string": "function envoy_on_request(h) end"}},
            ),
        },
        {
            "name": "envoy.filters.http.router",
            "typed_config": _typed("envoy.extensions.filters.http.router.v3.Router", {}),
        },
    ]
    manager = _typed(
        "envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
        {
            "stat_prefix": "graylane",
            "max_request_headers_kb": HEADERS_LIMIT >> 10,
            "common_http_protocol_options": {"max_headers_count": HEADER_COUNT_LIMIT},
            "use_remote_address": True,
            "skip_xff_append": True,
            "rds": {
                "route_config_name": ROUTE_CONFIG,
                "config_source": {
                    "resource_api_version": "V3",
                    "path_config_source": {"path": str(site.directory / "rds.json")},
                },
            },
            "http_filters": http_filters,
            "access_log": [
                {
                    "name": "envoy.access_loggers.file",
                    "typed_config": _typed(
                        "envoy.extensions.access_loggers.file.v3.FileAccessLog",
                        {
                            "path": str(site.access_log),
                            "log_format": {"json_format": ACCESS_LOG_FORMAT},
                        },
                    ),
                }
            ],
        },
    )
    return {
        "node": {"id": "graylane-agent", "cluster": "graylane"},
        "admin": {
            "address": {"socket_address": {"address": "127.0.0.1", "port_value": site.admin_port}}
        },
        "static_resources": {
            "listeners": [
                {
                    "name": "graylane",
                    "address": {"socket_address": {"address": site.host, "port_value": site.port}},
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
            ]
        },
        "dynamic_resources": {
            "cds_config": {
                "resource_api_version": "V3",
                "path_config_source": {"path": str(site.directory / "cds.json")},
            }
        },
    }


def render_envoy(generation: Generation, site: Site, version: str | None = None) -> dict[str, str]:
    """{"cds.json": ..., "rds.json": ...}: the generation's discovery responses, with
    `version` (default: the generation number) as their version_info."""
    version = str(generation.generation) if version is None else version
    return {
        "cds.json": _dump({"version_info": version, "resources": clusters(generation, site)}),
        "rds.json": _dump({"version_info": version, "resources": [routes(generation, site)]}),
    }


def _dump(document: dict) -> str:
    return json.dumps(document, indent=1, sort_keys=True) + "\n"


def clusters(generation: Generation, site: Site) -> list[dict]:
    result = []
    for pool in generation.pools:
        numeric = all(_is_ip(endpoint.host) for endpoint in pool.endpoints)
        result.append(
            _typed(
                "envoy.config.cluster.v3.Cluster",
                {
                    "name": pool.name,
                    "type": "STATIC" if numeric else "STRICT_DNS",
                    "connect_timeout": f"{site.connect_timeout}s",
                    "lb_policy": "ROUND_ROBIN",
                    "load_assignment": {
                        "cluster_name": pool.name,
                        "endpoints": [
                            {
                                "lb_endpoints": [
                                    {
                                        "endpoint": {
                                            "address": {
                                                "socket_address": {
                                                    "address": e.host,
                                                    "port_value": e.port,
                                                }
                                            }
                                        },
                                        "load_balancing_weight": e.weight,
                                    }
                                    for e in pool.endpoints
                                ]
                            }
                        ],
                    },
                },
            )
        )
    return result


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _retry(retry_on: str) -> dict:
    """Another instance after a connect failure, or after the shutting-down marker (the
    instance ran nothing); after a reset only where `retry_on` says so (idempotent)."""
    return {
        "retry_on": retry_on,
        "num_retries": 2,
        "retriable_headers": [{"name": SHUTTING_DOWN_HEADER, "string_match": {"exact": "true"}}],
        "retry_host_predicate": [
            {
                "name": "envoy.retry_host_predicates.previous_hosts",
                "typed_config": _typed(
                    "envoy.extensions.retry.host.previous_hosts.v3.PreviousHostsPredicate", {}
                ),
            }
        ],
        "host_selection_retry_max_attempts": 5,
    }


def routes(generation: Generation, site: Site) -> dict:
    timeout = f"{site.request_timeout}s"

    def proxied(retry_on: str) -> dict:
        return {
            "cluster_header": POOL_HEADER,
            "timeout": timeout,
            "retry_policy": _retry(retry_on),
        }

    return _typed(
        "envoy.config.route.v3.RouteConfiguration",
        {
            "name": ROUTE_CONFIG,
            "request_headers_to_remove": [POOL_HEADER],
            "virtual_hosts": [
                {
                    "name": "graylane",
                    "domains": ["*"],
                    "typed_per_filter_config": {
                        LUA: {
                            "@type": LUA_PER_ROUTE,
                            "source_code": {"inline_string": lua_source(generation, site)},
                        }
                    },
                    "routes": [
                        {
                            "match": {"path": "/-/readyz"},
                            "direct_response": {
                                "status": 200,
                                "body": {"inline_string": f"generation {generation.generation}\n"},
                            },
                            "typed_per_filter_config": {
                                LUA: {"@type": LUA_PER_ROUTE, "disabled": True}
                            },
                        },
                        # One route per idempotent method: an exact comparison each, GET
                        # first, is cheaper per request than one regex.
                        *(
                            {
                                "match": {
                                    "prefix": "/",
                                    "headers": [
                                        {"name": ":method", "string_match": {"exact": method}}
                                    ],
                                },
                                "route": proxied("connect-failure,reset,retriable-headers"),
                            }
                            for method in IDEMPOTENT
                        ),
                        {
                            "match": {"prefix": "/"},
                            "route": proxied(
                                "connect-failure,reset-before-request,retriable-headers"
                            ),
                        },
                    ],
                }
            ],
        },
    )


def lua_string(text: str) -> str:
    """A Lua string literal of `text`'s UTF-8 bytes: printable ASCII as is, the rest as
    decimal escapes (no byte of the text can end the literal or start an escape)."""
    out = []
    for byte in text.encode("utf-8", "surrogatepass"):
        if 0x20 <= byte < 0x7F and byte not in (0x22, 0x5C):
            out.append(chr(byte))
        else:
            out.append(f"\\{byte:03d}")
    return '"' + "".join(out) + '"'


def _lua_ranges(ranges: Ranges) -> str:
    v4, v6 = ranges
    text4 = lua_string("".join(f"{first:x}-{last:x}," for first, last in v4))
    text6 = lua_string("".join(f"{first:032x}-{last:032x}," for first, last in v6))
    return f"{{v4 = {text4}, v6 = {text6}}}"


def lua_source(generation: Generation, site: Site) -> str:
    rules = generation.rules
    lines = [
        f"-- Graylane generation {generation.generation} (revision {generation.revision})",
        f"local ENABLED = {'true' if rules.enabled else 'false'}",
        "local HEADER_KEY = " + (lua_string(rules.header_name) if rules.header_name else "nil"),
        f"local HEADER_VALUE = {lua_string(rules.header_value)}",
        f"local USER_KEY = {lua_string(rules.user_header)}",
        f"local CITY_KEY = {lua_string(rules.city_header)}",
        f"local GEO_HEADER = {lua_string(GEO_HEADER)}",
        f"local REQUEST_LINE_LIMIT = {REQUEST_LINE_LIMIT}",
        f"local LINE_TOO_LONG = {lua_string(LINE_TOO_LONG)}",
        f"local IPS = {_lua_ranges((rules.v4, rules.v6))}",
        f"local TRUSTED = {_lua_ranges(trusted_ranges(site))}",
        f"local LOCAL = {_lua_ranges(local_ranges())}",
        "local CITIES = {" + "".join(f"[{lua_string(c)}] = true, " for c in rules.cities) + "}",
        # The users as two strings, one after another and their lengths in bytes (decide.lua
        # indexes them): not 100,000 string objects for Envoy's garbage collector.
        f"local USER_TEXT = {lua_string(''.join(rules.users))}",
        "local USER_LENGTHS = "
        + lua_string(
            "".join(f"{len(user.encode('utf-8', 'surrogatepass'))}," for user in rules.users)
        ),
        "local SERVICES = {",
    ]
    for route in generation.routes:
        seed = service_seed(route.service)
        pools = "".join(
            f"{flag} = {lua_string(pool)}, " for flag, pool in route.pools.items() if pool
        )
        lines.append(
            f"  [{lua_string(route.service)}] = {{percent = {route.percent}, "
            f"seed = {seed if route.salted else 0}, "
            f"targeted = {'true' if route.targeted else 'false'}, {pools}}},"
        )
    lines.append("}")
    library = resources.files("dataplane.agent").joinpath("decide.lua").read_text()
    return "\n".join(lines) + "\n" + library
