"""The service graph of the recent calls (call_graph.graph): figures per edge and per caller
version and lane over the window, and each service's call depth, cycles included."""

import pytest

from call_graph import services
from call_graph.graph import recent_graph

pytestmark = pytest.mark.django_db

NOW = 1_800_000_030  # 30 s into a minute


def calls(caller, callee, total, errors=0, version="V1", lane=None, ts=NOW - 20):
    return {"caller": caller, "caller_version": version, "callee": callee,
            "callee_version": "V1", "lane": lane, "ts": ts, "total": total,
            "errors": errors}  # fmt: skip


def record(*samples):
    # The serializer refuses times this far from the clock; the shaping does not care.
    services.record(list(samples))


def test_an_edge_adds_up_its_flows_over_the_window_and_leaves_older_calls_out():
    record(
        calls("user-app", "order-app", 300, errors=3),
        calls("user-app", "order-app", 60, ts=NOW - 200),  # same flow, an earlier minute
        calls("user-app", "order-app", 30, errors=30, version="V2", lane="gray"),
        calls("user-app", "order-app", 999, ts=NOW - 400),  # before the window
        calls("user-app", "order-app", 0, version="V3"),  # nothing was called
    )
    graph = recent_graph(now=NOW)
    # From the start of the minute 300 s ago to now.
    assert (graph.since, graph.seconds) == (NOW - 30 - 300, 330)
    [edge] = graph.edges
    assert (edge.caller, edge.callee, edge.back) == ("user-app", "order-app", False)
    assert (edge.calls.total, edge.calls.errors) == (390, 33)
    assert edge.calls.per_s == pytest.approx(390 / 330)
    assert edge.calls.success_rate == pytest.approx(100 * 357 / 390)
    assert [
        (f.caller_version, f.lane, f.calls.total, f.calls.success_rate) for f in edge.flows
    ] == [
        ("V1", "", 360, pytest.approx(100 * 357 / 360)),
        ("V2", "gray", 30, 0.0),
    ]
    assert graph.depth == {"order-app": 1, "user-app": 0}


def test_depth_is_the_longest_chain_of_calls():
    record(
        calls("gateway-app", "user-app", 10),
        calls("user-app", "order-app", 10),
        calls("order-app", "pay-app", 10),
        calls("gateway-app", "pay-app", 10),  # a shortcut: pay-app stays at the end
    )
    graph = recent_graph(now=NOW)
    assert graph.depth == {"gateway-app": 0, "user-app": 1, "order-app": 2, "pay-app": 3}
    assert not any(e.back for e in graph.edges)


def test_a_call_back_up_the_chain_or_to_itself_closes_a_cycle_drawn_backwards():
    record(
        calls("gateway-app", "user-app", 10),
        calls("user-app", "order-app", 10),
        calls("order-app", "pay-app", 10),
        calls("pay-app", "user-app", 10),
        calls("pay-app", "pay-app", 10),
    )
    graph = recent_graph(now=NOW)
    assert graph.depth == {"gateway-app": 0, "user-app": 1, "order-app": 2, "pay-app": 3}
    assert {(e.caller, e.callee) for e in graph.edges if e.back} == {
        ("pay-app", "user-app"),
        ("pay-app", "pay-app"),
    }


def test_services_that_only_call_each_other_still_get_an_order():
    record(calls("a-app", "b-app", 1), calls("b-app", "a-app", 1))
    graph = recent_graph(now=NOW)
    assert graph.depth == {"a-app": 0, "b-app": 1}
    assert [(e.caller, e.back) for e in graph.edges] == [("a-app", False), ("b-app", True)]


def test_no_calls_no_edges():
    record(calls("user-app", "order-app", 5, ts=NOW - 1000))
    graph = recent_graph(now=NOW)
    assert graph.edges == [] and graph.depth == {}
