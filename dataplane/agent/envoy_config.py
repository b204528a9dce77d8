"""Envoy's configuration of a generation: pure functions of (Generation, Site).

* The bootstrap (written once when Envoy starts) holds a static listener whose HTTP
  connection manager takes its routes from a file (RDS, `path_config_source`), and the
  clusters from another file (CDS). The listener never changes, so no connection is
  drained when a generation is applied.
* CDS: one cluster per (service, version), `<service>.<version>`, and one per service
  with every version, `<service>` (the `ALL` flag).
* RDS: the decision is a Lua filter whose code and data come with the route configuration
  (lua_data.lua_source: decide.lua, which nginx runs too, with the generation's data); it
  sets the route's headers as the Python gateway does (replacing a client's) and the pool
  header that the route's `cluster_header` follows. With --geoip, a first Lua filter names
  the client (behind trusted proxies) for the geoip filter, which looks up its city.
* The limits of a request head (dataplane/gateway/limits.py): the connection manager counts
  the headers and their bytes (431), the Lua filter measures the request line (414). Envoy
  has no limit of one header (docs/agent.md says why the filter does not measure each).
"""

from __future__ import annotations

import ipaddress
import json
from pathlib import Path
from typing import Any

from dataplane.agent.ir import Generation
from dataplane.agent.lua_data import (
    CLIENT_HEADER,
    GEO_HEADER,
    POOL_HEADER,
    ROUTE_HEADERS,
    lua_source,
)
from dataplane.agent.samples import ENVOY_FORMAT
from dataplane.agent.site import Site
from dataplane.gateway.limits import HEADER_COUNT_LIMIT, HEADERS_LIMIT

ROUTE_CONFIG = "graylane"
SHUTTING_DOWN_HEADER = "x-instance-shutting-down"
IDEMPOTENT = ("GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE")
LUA = "envoy.filters.http.lua"
PEER_ADDRESS = "%DOWNSTREAM_DIRECT_REMOTE_ADDRESS_WITHOUT_PORT%"
CALLER_LUA = "graylane.caller"
LUA_PER_ROUTE = "type.googleapis.com/envoy.extensions.filters.http.lua.v3.LuaPerRoute"
ACCESS_LOG_FORMAT = {
    # The service is the path's first segment (the agent reads it from the path): cheaper
    # than dynamic metadata set by the Lua filter, which cost Envoy 10 % of its throughput.
    "path": "%REQ(:PATH)%",
    "flag": "%REQ(X-GRAY-STATUS)%",
    "lane": "%REQ(X-GRAY-LANE)%",
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
            _lua_filter(CALLER_LUA),
            {
                "name": "envoy.filters.http.geoip",
                "typed_config": _typed(
                    "envoy.extensions.filters.http.geoip.v3.Geoip",
                    {
                        "custom_header_config": {"header_name": CLIENT_HEADER},
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
                        },
                    },
                ),
            },
        ]
    http_filters += [
        {
            # The client's pool and route headers dropped here, not by a call from Lua each;
            # and the peer appended to X-Forwarded-For (joined with "," to the client's
            # chain), where the decision reads it: from the stream info in Lua it cost Envoy
            # about 5,000 instructions per request, a header read 150, and the filter then
            # rewrites the header only for a client that sent a chain (", " between hops).
            "name": "graylane.strip_route",
            "typed_config": _typed(
                "envoy.extensions.filters.http.header_mutation.v3.HeaderMutation",
                {
                    "mutations": {
                        "request_mutations": [
                            *({"remove": name} for name in (POOL_HEADER, *ROUTE_HEADERS)),
                            {
                                "append": {
                                    "header": {"key": "x-forwarded-for", "value": PEER_ADDRESS},
                                    "append_action": "APPEND_IF_EXISTS_OR_ADD",
                                }
                            },
                        ]
                    }
                },
            ),
        },
        _lua_filter(LUA),
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
            # Not Envoy's own append: for a loopback peer it appends the host's address.
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
                _file_log(site.access_log, ACCESS_LOG_FORMAT),
                *([_sample_log(site)] if site.sample_rate else []),
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


def _file_log(path: Path, log_format: dict) -> dict:
    return {
        "name": "envoy.access_loggers.file",
        "typed_config": _typed(
            "envoy.extensions.access_loggers.file.v3.FileAccessLog",
            {"path": str(path), "log_format": {"json_format": log_format}},
        ),
    }


def _sample_log(site: Site) -> dict:
    """The requests decide.lua sampled: those whose Lua filter set graylane's `sample`
    (samples.py)."""
    return {
        **_file_log(site.sample_log, ENVOY_FORMAT),
        "filter": {
            "metadata_filter": {
                "matcher": {
                    "filter": "graylane",
                    "path": [{"key": "sample"}],
                    "value": {"present_match": True},
                },
                "match_if_key_not_found": False,
            }
        },
    }


def _lua_filter(name: str) -> dict:
    """A Lua filter whose code comes with the route configuration (LuaPerRoute)."""
    return {
        "name": name,
        "typed_config": _typed(
            "envoy.extensions.filters.http.lua.v3.Lua",
            {"default_source_code": {"inline_string": "function envoy_on_request(h) end"}},
        ),
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
    lua = lua_per_route(generation, site)

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
            # The GeoIP filter's headers only where it runs: each removal is a scan of the
            # request's headers.
            "request_headers_to_remove": [
                POOL_HEADER,
                *((CLIENT_HEADER, GEO_HEADER) if site.geoip else ()),
            ],
            "virtual_hosts": [
                {
                    "name": "graylane",
                    "domains": ["*"],
                    "typed_per_filter_config": lua,
                    "routes": [
                        {
                            "match": {"path": "/-/readyz"},
                            "direct_response": {
                                "status": 200,
                                "body": {"inline_string": f"generation {generation.generation}\n"},
                            },
                            "typed_per_filter_config": {
                                name: {"@type": LUA_PER_ROUTE, "disabled": True} for name in lua
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


def lua_per_route(generation: Generation, site: Site) -> dict[str, dict]:
    """The Lua filters' code of this generation: the decision, and with --geoip the filter
    that names the client for the geoip filter before it."""

    def per_route(stage: str) -> dict:
        source = lua_source(generation, site, "envoy", stage)
        return {"@type": LUA_PER_ROUTE, "source_code": {"inline_string": source}}

    filters = {LUA: per_route("decide")}
    if site.geoip:
        filters[CALLER_LUA] = per_route("caller")
    return filters
