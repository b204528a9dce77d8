"""The routing table compiled from a gateway document: what it refuses (a document it cannot
read as a whole), what it skips (records it cannot use: it applies the rest), which instances
each flag and lane may reach, and what a request of each carries on."""

import json

import pytest

from dataplane.gateway.routing import ConfigError, RoutingTable, route_key
from routing_engine.hops import Ask, parse

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


def ports(table, service, flag, lane=None):
    version, instances = table.services[service].by_route[route_key(flag, lane)]
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
        (lambda d: d["gray"].update(ips=["10.1.2.3/16"]), "gray"),
        (lambda d: d["gray"].update(percent=101), "gray"),
        (lambda d: d.pop("gray"), "gray"),
        (lambda d: d.update(generation="7"), "generation"),
        (lambda d: d.pop("revision"), "revision"),
        (lambda d: d.update(services=[]), "services"),
    ],
)
def test_a_document_unreadable_as_a_whole_is_refused_saying_what_is_wrong(mutate, message):
    doc = document()
    mutate(doc)
    with pytest.raises(ConfigError, match=message):
        compile_(doc)


def skipped(table) -> dict[str, str]:
    return {entry.record: entry.reason for entry in table.skipped}


@pytest.mark.parametrize(
    "change, reason",
    [
        ({"port": 0}, "port: 0 is not a port"),
        ({"port": "7001"}, "port: '7001' is not a port"),
        ({"port": True}, "port: True is not a port"),
        ({"host": ""}, "host: '' is not an IP address or host name"),
        ({"host": "10.0.0.1; drop"}, "host: '10.0.0.1; drop' is not an IP address or host name"),
        ({"host": "fe80::1%eth0"}, "host: 'fe80::1%eth0' has a zone index"),
        ({"host": None}, "host: None is not text"),
        ({"weight": -1}, "weight: -1 is not a number from 0 to 10000"),
        ({"weight": float("nan")}, "weight: nan is not a number from 0 to 10000"),
        ({"weight": 1e6}, "weight: 1000000.0 is not a number from 0 to 10000"),
    ],
)
def test_an_instance_that_cannot_be_used_is_skipped_and_the_rest_applied(change, reason):
    doc = document()
    doc["services"]["user-app"]["instances"][0].update(change)
    table = compile_(doc)
    assert skipped(table) == {"services.user-app.instances[a]": reason}
    assert ports(table, "user-app", "PROD") == ("V1", [])
    assert ports(table, "user-app", "GRAY") == ("V2", [7002])
    assert "order-app" in table.services


def test_an_instance_that_is_not_an_object_or_listed_twice_is_skipped():
    doc = document()
    instances = doc["services"]["user-app"]["instances"]
    instances.append("10.0.0.3:7003")
    instances.append({**instances[0], "host": "10.0.0.9"})
    table = compile_(doc)
    assert skipped(table) == {
        "services.user-app.instances[2]": "not an object",
        "services.user-app.instances[a]": "id: listed twice; the first one is used",
    }
    assert ports(table, "user-app", "PROD") == ("V1", [7001])


ALL_ONLY = "it takes ALL traffic only"


@pytest.mark.parametrize(
    "version, reported",
    [
        (None, None),  # how the dashboard says "no version"
        ("missing", None),
        ("", "version: '' is empty; it takes ALL traffic only"),
        ("   ", "version: '   ' is empty; it takes ALL traffic only"),
        (7, "version: 7 is not text; it takes ALL traffic only"),
        ("V1\x01", f"version: 'V1\\x01' contains control characters; {ALL_ONLY}"),
        ("V" * 65, f"version: '{'V' * 58}… is longer than 64 characters; {ALL_ONLY}"),
    ],
)
def test_an_instance_without_a_usable_version_takes_all_traffic_only(version, reported):
    doc = document()
    instance = doc["services"]["user-app"]["instances"][0]
    if version == "missing":
        del instance["version"]
    else:
        instance["version"] = version
    table = compile_(doc)
    assert ports(table, "user-app", "ALL") == (None, [7001, 7002])
    assert ports(table, "user-app", "PROD") == ("V1", [])
    assert ports(table, "user-app", "GRAY") == ("V2", [7002])
    assert table.services["user-app"].instances[0].version is None
    expected = {} if reported is None else {"services.user-app.instances[a].version": reported}
    assert skipped(table) == expected


def test_a_version_is_read_without_surrounding_blanks():
    doc = document()
    doc["services"]["user-app"]["instances"][0]["version"] = " V1 "
    assert ports(compile_(doc), "user-app", "PROD") == ("V1", [7001])


@pytest.mark.parametrize(
    "mutate, reason",
    [
        (lambda e: e.update(prod=""), "prod: '' is empty"),
        (lambda e: e.pop("gray"), "gray: None is not text"),
        (lambda e: e.update(instances={}), "instances: dict, not a list"),
    ],
)
def test_a_service_entry_that_cannot_be_used_keeps_the_entry_in_force(mutate, reason):
    first = compile_(document())
    doc = document(generation=4)
    doc["services"]["user-app"]["instances"] = []  # what the bad entry would have changed
    mutate(doc["services"]["user-app"])
    doc["gray"]["header"] = {"name": "gray", "value": "canary"}
    table = RoutingTable.from_document(json.dumps(doc).encode(), first)
    assert skipped(table) == {"services.user-app": f"{reason}; routed as in generation 3"}
    assert ports(table, "user-app", "PROD") == ("V1", [7001])
    assert ports(table, "user-app", "GRAY") == ("V2", [7002])
    # The rest of the document is in force: the new header rule.
    assert table.services["user-app"].decide({"gray": "canary"}).flag == "GRAY"
    # Without a table in force, the service is not routed at all.
    alone = compile_(doc)
    assert "user-app" not in alone.services
    assert skipped(alone) == {"services.user-app": f"{reason}; not routed"}


def test_a_service_that_is_not_a_name_is_skipped():
    doc = document()
    doc["services"]["a/b"] = {"prod": "V1", "gray": "V2", "instances": []}
    doc["services"]["x y"] = []
    table = compile_(doc)
    assert set(table.services) == {"user-app", "order-app"}
    assert set(skipped(table)) == {"services.'a/b'", "services.'x y'"}
    assert all(reason.endswith("; not routed") for reason in skipped(table).values())


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


@pytest.mark.parametrize(
    "routing, record, reason",
    [
        ({"percent": 101}, "percent", "Must be between 0 and 100, got 101."),
        (
            {"percent": "5"},
            "percent",
            "Must be a number from 0 to 100 with at most two decimals, got '5'.",
        ),
        ({"targeted": 1}, "targeted", "Must be a boolean (true or false), got int."),
    ],
)
def test_a_bad_service_routing_is_skipped_and_the_policys_applies(routing, record, reason):
    doc = document()
    doc["gray"]["percent"] = 100
    doc["services"]["user-app"].update(routing)
    table = compile_(doc)
    inherited = "the policy's percent applies" if record == "percent" else "the policy's rules"
    (entry,) = table.skipped
    assert entry.record == f"services.user-app.{record}"
    assert entry.reason.startswith(f"{reason} ({inherited}")
    assert table.services["user-app"].routing == {}
    assert table.services["user-app"].decide({}, user="1001").flag == "GRAY"  # 100 % in gray


# -- lanes -----------------------------------------------------------------------------------

FEATURE_X = {
    "name": "feature-x",
    "priority": 100,
    "match": {"header": {"name": "x-lane", "value": "feature-x"}, "ips": [], "cities": [],
              "users": [], "percent": 0},
    "members": {"user-app": {"version": "V3", "percent": 0, "targeted": True},
                "pay-app": {"version": "V3", "percent": 0, "targeted": True}},
}  # fmt: skip


def with_lanes(*lanes, **changes) -> dict:
    doc = document(lanes=list(lanes), gray_priority=1000, **changes)
    doc["services"]["user-app"]["instances"].append(
        {"id": "c", "host": "10.0.0.3", "port": 7003, "version": "V3", "weight": 1}
    )
    return doc


def route_of(table, key: str) -> tuple[dict[str, str], str]:
    """(the headers a request of that route carries on, its baggage members)."""
    route = table.routes[key]
    lines = route.lines.decode().strip().split("\r\n")
    return dict(line.split(": ", 1) for line in lines), route.baggage.decode()


def test_a_lane_reaches_its_members_versions_and_prod_elsewhere():
    table = compile_(with_lanes(FEATURE_X))
    assert ports(table, "user-app", "GRAY", "feature-x") == ("V3", [7003])
    # order-app is no member: prod (it has no instance: nothing, as for PROD).
    assert ports(table, "order-app", "GRAY", "feature-x") == ("V1", [])
    assert ports(table, "user-app", "GRAY") == ("V2", [7002])  # the gray lane as before
    assert ports(table, "user-app", "PROD") == ("V1", [7001])
    decide = table.services["user-app"].decide
    decision = decide({"x-lane": "feature-x", "gray": "gray-996"})
    assert (decision.flag, decision.lane) == ("GRAY", "feature-x")  # priority 100 < 1000
    assert decide({"gray": "gray-996"}).lane == "gray"
    assert b"x-lane" in table.decision_headers


def test_a_member_version_with_no_instance_falls_back_to_prod():
    doc = with_lanes(FEATURE_X)
    doc["services"]["user-app"]["instances"].pop()  # no V3 instance left
    table = compile_(doc)
    assert ports(table, "user-app", "GRAY", "feature-x") == ("V1", [7001])


def test_each_route_carries_its_flag_lane_and_the_versions_of_every_later_hop():
    doc = with_lanes(FEATURE_X)
    doc["services"]["order-app"]["quarantined"] = ["V2"]
    table = compile_(doc)
    headers, baggage = route_of(table, "feature-x")
    assert baggage == "graylane.gray=GRAY,graylane.lane=feature-x"
    assert headers["x-gray-status"] == "GRAY" and headers["x-gray-lane"] == "feature-x"
    versions = parse(headers["x-gray-versions"])
    assert versions.ask("user-app") == Ask("V3", "V1")
    assert versions.ask("pay-app") == Ask("V3", "V1")  # a member the document has no entry of
    assert versions.ask("order-app") == Ask("V1")
    assert versions.ask("any-other") == Ask("V1")
    assert versions.excluded("order-app") == {"V2"}

    headers, baggage = route_of(table, "gray")
    assert (headers["x-gray-lane"], baggage) == ("gray", "graylane.gray=GRAY,graylane.lane=gray")
    assert parse(headers["x-gray-versions"]).ask("user-app") == Ask("V2", "V1")
    headers, baggage = route_of(table, "PROD")
    assert "x-gray-lane" not in headers and baggage == "graylane.gray=PROD"
    assert headers["x-gray-versions"] == "*=V1,!order-app=V2"
    # ALL asks for nothing: only the quarantines go on.
    assert route_of(table, "ALL")[0]["x-gray-versions"] == "!order-app=V2"


def test_versions_are_not_sent_for_all_without_quarantines_nor_with_routing_off():
    table = compile_(with_lanes(FEATURE_X))
    assert "x-gray-versions" not in route_of(table, "ALL")[0]
    doc = with_lanes(FEATURE_X)
    doc["gray"]["routing"] = False
    table = compile_(doc)
    assert "x-gray-versions" not in route_of(table, "feature-x")[0]
    assert ports(table, "user-app", "GRAY", "feature-x") == (None, [7001, 7002, 7003])


def test_a_quarantined_version_is_never_a_candidate_even_if_listed():
    doc = with_lanes(FEATURE_X)
    doc["services"]["user-app"]["quarantined"] = ["V3"]  # its instance listed all the same
    table = compile_(doc)
    assert ports(table, "user-app", "GRAY", "feature-x") == ("V1", [7001])
    assert ports(table, "user-app", "ALL") == (None, [7001, 7002])


def test_a_bad_lane_is_skipped_and_the_rest_applied():
    doc = with_lanes(FEATURE_X, {**FEATURE_X, "name": "Bad Name"}, {**FEATURE_X, "name": "p",
                     "priority": -1})  # fmt: skip
    table = compile_(doc)
    assert set(table.lanes) == {"feature-x"}
    assert skipped(table) == {
        "lanes[1]": "'Bad Name' is not a lane name: 1-63 lower-case letters, digits and '-', "
        "a letter or digit first.",
        "lanes[p]": "priority: Must be a whole number from 0 to 1000000, got -1.",
    }
    assert ports(table, "user-app", "GRAY", "feature-x") == ("V3", [7003])
    assert set(table.routes) == {"ALL", "PROD", "gray", "feature-x"}


def test_a_document_without_lanes_routes_and_sends_as_before_lanes():
    table = compile_(document())
    assert set(table.routes) == {"ALL", "PROD", "gray"}
    headers, _ = route_of(table, "gray")
    assert headers == {
        "x-gray-status": "GRAY",
        "x-gray-lane": "gray",
        "x-gray-versions": "*=V2/V1",
    }
