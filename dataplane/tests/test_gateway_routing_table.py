"""The routing table compiled from a gateway document: what it refuses, and which instances
each flag may reach."""

import json

import pytest

from dataplane.gateway.routing import ConfigError, RoutingTable

GRAY = {
    "enabled": True,
    "routing": True,
    "header": {"name": "gray", "value": "gray-996"},
    "ips": [],
    "cities": [],
    "users": [],
    "user_header": "X-User-No",
    "city_header": "X-City",
    "percent": 0,
}


def document(**changes) -> dict:
    doc = {
        "generation": 3,
        "revision": 2,
        "checksum": "c",
        "gray": dict(GRAY),
        "versions": {"prod": "V1", "gray": "V2"},
        "services": {
            "user-app": {
                "prod": "V1",
                "gray": "V2",
                "instances": [
                    {"id": "a", "host": "10.0.0.1", "port": 7001, "version": "V1", "weight": 1},
                    {"id": "b", "host": "10.0.0.2", "port": 7002, "version": "V2", "weight": 1},
                ],
            },
            "order-app": {"prod": "V1", "gray": "V2", "instances": []},
        },
    }
    doc.update(changes)
    return doc


def compile_(doc) -> RoutingTable:
    return RoutingTable.from_document(json.dumps(doc).encode())


def ports(table, service, flag):
    version, instances = table.services[service].by_flag[flag]
    return version, [i.port for i in instances]


def test_each_flag_reaches_its_version_and_all_reaches_every_one():
    table = compile_(document())
    assert ports(table, "user-app", "PROD") == ("V1", [7001])
    assert ports(table, "user-app", "GRAY") == ("V2", [7002])
    assert ports(table, "user-app", "ALL") == (None, [7001, 7002])
    assert ports(table, "order-app", "PROD") == ("V1", [])


def test_routing_off_means_no_version_filter_for_any_flag():
    doc = document()
    doc["gray"]["routing"] = False
    table = compile_(doc)
    for flag in ("PROD", "GRAY", "ALL"):
        assert ports(table, "user-app", flag) == (None, [7001, 7002])


def test_gray_falls_back_to_prod_unless_told_not_to():
    doc = document()
    doc["services"]["user-app"]["instances"].pop()
    body = json.dumps(doc).encode()
    assert ports(RoutingTable.from_document(body), "user-app", "GRAY") == ("V1", [7001])
    strict = RoutingTable.from_document(body, fallback_to_prod=False)
    assert ports(strict, "user-app", "GRAY") == ("V2", [])


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda d: d["services"]["user-app"].update(prod=""), "user-app.prod"),
        (lambda d: d["services"]["user-app"].pop("gray"), "user-app.gray"),
        (lambda d: d["services"]["user-app"]["instances"][0].update(port=0), "port"),
        (lambda d: d["services"]["user-app"]["instances"][0].pop("version"), "version"),
        (lambda d: d["services"]["user-app"]["instances"][0].update(weight=-1), "weight"),
        (lambda d: d["gray"].update(ips=["10.1.2.3/16"]), "gray"),
        (lambda d: d["gray"].update(percent=101), "gray"),
        (lambda d: d.update(generation="7"), "generation"),
        (lambda d: d.update(services=[]), "services"),
    ],
)
def test_a_bad_document_is_refused_saying_what_is_wrong(mutate, message):
    doc = document()
    mutate(doc)
    with pytest.raises(ConfigError, match=message):
        compile_(doc)


@pytest.mark.parametrize("body", [b"", b"{", b"[]", b'"x"'])
def test_what_is_not_a_json_object_is_refused(body):
    with pytest.raises(ConfigError):
        RoutingTable.from_document(body)


def test_a_reload_keeps_each_services_round_robin_going():
    first = compile_(document())
    balancer = first.services["user-app"].balancer
    second = RoutingTable.from_document(json.dumps(document(generation=4)).encode(), first)
    assert second.services["user-app"].balancer is balancer


def test_a_service_percent_routes_that_service_only_and_sticks():
    doc = document()
    doc["services"]["user-app"].update({"percent": 30, "targeted": False})
    table = compile_(doc)
    users = [str(n) for n in range(3000)]
    user_app = table.services["user-app"].decide
    order_app = table.services["order-app"].decide
    gray = {u for u in users if user_app({}, user=u).flag == "GRAY"}
    assert 0.25 < len(gray) / len(users) < 0.35
    assert not any(order_app({}, user=u).flag == "GRAY" for u in users)
    # Not targeted: the header sends none of user-app's requests to gray, order-app's yes.
    assert user_app({"gray": "gray-996"}).flag == "PROD"
    assert order_app({"gray": "gray-996"}).flag == "GRAY"
    doc["services"]["user-app"]["percent"] = 60
    wider = compile_(doc).services["user-app"].decide
    assert gray <= {u for u in users if wider({}, user=u).flag == "GRAY"}


@pytest.mark.parametrize("routing", [{"percent": 101}, {"percent": "5"}, {"targeted": 1}])
def test_a_bad_service_routing_is_refused(routing):
    doc = document()
    doc["services"]["user-app"].update(routing)
    with pytest.raises(ConfigError, match="services.user-app"):
        compile_(doc)
