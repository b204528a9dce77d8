"""The agent's renderings of one generation, compared with golden files: a change to what
Envoy or nginx is given shows up as a diff under dataplane/tests/golden/ in review.
`UPDATE_GOLDEN=1 pytest dataplane/tests/test_agent_render.py` rewrites them."""

import json
import os
from pathlib import Path

import pytest

from dataplane.agent.envoy_config import bootstrap, render_envoy
from dataplane.agent.ir import compile_document
from dataplane.agent.lua_data import lua_data, lua_string
from dataplane.agent.nginx_config import render_nginx
from dataplane.agent.site import Site
from dataplane.gateway.routing import ConfigError

GOLDEN = Path(__file__).parent / "golden"
SITE = Site(
    host="0.0.0.0",
    port=8080,
    admin_port=8081,
    directory=Path("/var/lib/graylane/engine"),
    trusted_proxies=("10.0.0.0/8",),
    geoip="/usr/share/GeoIP/GeoLite2-City.mmdb",
)


def document(**gray) -> dict:
    instances = [
        {"id": "a", "host": "10.0.0.5", "port": 7201, "version": "V1", "weight": 1.0},
        {"id": "b", "host": "10.0.0.6", "port": 7201, "version": "V1", "weight": 2.0},
        {"id": "c", "host": "10.0.0.7", "port": 7201, "version": "V2", "weight": 1.0},
    ]
    return {
        "generation": 153,
        "revision": 7,
        "checksum": "c0ffee",
        "gray": {
            "enabled": True,
            "routing": True,
            "header": {"name": "gray", "value": "gray-996"},
            "ips": ["127.0.0.1", "10.1.0.0/16", "2001:db8::/32"],
            "cities": ["local", "Beijing"],
            "users": ["1001", "~1002", 'quote"d'],
            "user_header": "X-User-No",
            "city_header": "X-City",
            "percent": 5,
            **gray,
        },
        "versions": {"prod": "V1", "gray": "V2"},
        "services": {
            "user-app": {"prod": "V1", "gray": "V2", "instances": instances},
            "order-app": {"prod": "V1", "gray": "V2", "instances": [], "percent": 25},
            "pay-app": {"prod": "V1", "gray": "V2", "instances": instances[2:], "targeted": False},
        },
        "gray_priority": 1000,
        "lanes": [
            {
                "name": "feature-x",
                "priority": 100,
                "match": {
                    "header": {"name": "x-lane", "value": "feature-x"},
                    "ips": ["10.2.0.0/16"],
                    "cities": ["Straße"],
                    "users": ["1001", "2002"],
                    "percent": 1.5,
                },
                "members": {"user-app": {"version": "V3", "percent": 0, "targeted": True}},
            }
        ],
    }


def compiled(**gray):
    return compile_document(json.dumps(document(**gray)).encode())


def check(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("UPDATE_GOLDEN"):
        path.write_text(text)
    assert path.read_text() == text, f"{name} changed: UPDATE_GOLDEN=1 rewrites it"


def test_the_compiled_form_has_a_pool_per_version_and_the_fallback_applied():
    generation = compiled()
    assert [pool.name for pool in generation.pools] == [
        "pay-app",
        "pay-app.V2",
        "user-app",
        "user-app.V1",
        "user-app.V2",
    ]
    routes = {route.service: route for route in generation.routes}
    assert routes["user-app"].pools == {
        "ALL": "user-app",
        "PROD": "user-app.V1",
        "gray": "user-app.V2",
        "feature-x": "user-app.V1",  # its V3 has no instance: prod
    }
    assert routes["order-app"].pools == {"ALL": None, "PROD": None, "gray": None, "feature-x": None}
    assert routes["pay-app"].pools["gray"] == "pay-app.V2"
    # The rules as routing_engine.portable exports them: lanes by their place in `order`.
    rules = generation.rules
    assert rules["order"] == ["feature-x", "gray"]
    assert rules["services"]["order-app"] == {"rules": [0, 1], "percents": [0], "own": [[1, 2500]]}
    assert rules["services"]["pay-app"] == {"rules": [0], "percents": [0, 1], "own": []}
    headers = {route.key: route.headers for route in generation.route_headers}
    assert headers["feature-x"] == (
        ("x-gray-status", "GRAY"),
        ("x-gray-lane", "feature-x"),
        ("x-gray-versions", "*=V1,user-app=V3/V1"),
    )
    weights = [e.weight for e in generation.pools[3].endpoints]
    assert weights == [100, 200]


def test_the_agent_skips_what_the_gateway_skips_and_refuses_what_it_refuses():
    bad = document()
    bad["services"]["user-app"]["instances"][0]["port"] = 0
    bad["services"]["order-app"]["percent"] = 101
    generation = compile_document(json.dumps(bad).encode())
    assert [entry.record for entry in generation.skipped] == [
        "services.user-app.instances[a]",
        "services.order-app.percent",
    ]
    pools = {pool.name: [e.host for e in pool.endpoints] for pool in generation.pools}
    assert pools["user-app.V1"] == ["10.0.0.6"]
    assert "order-app" not in generation.rules["services"]  # the policy's percent applies
    bad = document()
    bad["gray"]["percent"] = 101
    with pytest.raises(ConfigError, match="gray"):
        compile_document(json.dumps(bad).encode())


def test_a_skipped_service_entry_keeps_the_agents_entry_in_force():
    first = compile_document(json.dumps(document()).encode())
    bad = document()
    bad["generation"] = 154
    bad["services"]["user-app"] = {"prod": "", "gray": "V2", "instances": []}
    second = compile_document(json.dumps(bad).encode(), previous=first)
    assert [(e.record, e.reason) for e in second.skipped] == [
        ("services.user-app", "prod: '' is empty; routed as in generation 153")
    ]
    assert second.routes == first.routes
    assert second.pools == first.pools


def test_an_instance_without_a_version_is_in_the_all_pool_only():
    doc = document()
    doc["services"]["user-app"]["instances"].append(
        {"id": "d", "host": "10.0.0.8", "port": 7201, "version": None, "weight": 1.0}
    )
    generation = compile_document(json.dumps(doc).encode())
    pools = {pool.name: [e.host for e in pool.endpoints] for pool in generation.pools}
    assert pools["user-app"] == ["10.0.0.5", "10.0.0.6", "10.0.0.7", "10.0.0.8"]
    assert pools["user-app.V1"] == ["10.0.0.5", "10.0.0.6"]
    assert pools["user-app.V2"] == ["10.0.0.7"]
    assert generation.skipped == ()
    assert generation.version_of("user-app", "10.0.0.8:7201") is None


def test_envoy_golden():
    files = render_envoy(compiled(), SITE)
    check("envoy-cds.json", files["cds.json"])
    check("envoy-rds.json", files["rds.json"])
    check("envoy-bootstrap.json", json.dumps(bootstrap(SITE), indent=1, sort_keys=True) + "\n")


def test_nginx_golden():
    check("nginx.conf", render_nginx(compiled(), SITE))
    check("nginx-disabled.conf", render_nginx(compiled(enabled=False), SITE))


def test_lua_data_golden():
    """The data above decide.lua, the same for both engines but the engine's name."""
    check("lua-data.lua", lua_data(compiled(), SITE, "nginx"))
    check("lua-data-disabled.lua", lua_data(compiled(enabled=False), SITE, "nginx"))


def test_lua_literals_cannot_be_broken_out_of():
    assert lua_string('a"b\\c\n') == '"a\\034b\\092c\\010"'
    assert lua_string("北") == '"\\229\\140\\151"'
