"""The overview's service graph: the services that called each other in the last 5 minutes as
linked boxes, the calls as labelled curves, the same in a table, and a plain sentence when
there were none; served alone for the page to swap in live."""

import re
import time
from html import unescape

import pytest
from django.test import Client

from call_graph import services as call_graph
from call_graph.graph import recent_graph
from dashboard.service_graph import FLOW_LINES, LINE_H, PAD, draw
from dashboard.templatetags.display import per_second
from registry_sync.models import Service

pytestmark = pytest.mark.django_db


@pytest.fixture
def viewer(make_user) -> Client:
    client = Client()
    client.force_login(make_user("vera", "viewer"))
    return client


def calls(caller, callee, total, errors=0, version="V1", lane=None):
    return {"caller": caller, "caller_version": version, "callee": callee,
            "callee_version": "V1", "lane": lane, "ts": int(time.time()) - 5, "total": total,
            "errors": errors}  # fmt: skip


def graph_of(html: str) -> str:
    match = re.search(r'<section class="card service-graph".*?</section>', html, re.S)
    assert match, "no service graph on the page"
    return match.group(0)


def test_the_overview_draws_the_calls_between_services(viewer):
    Service.objects.create(name="user-app")
    Service.objects.create(name="order-app")
    call_graph.record(
        [
            calls("user-app", "order-app", 600, errors=6),
            calls("user-app", "order-app", 60, errors=30, version="V2", lane="gray"),
            calls("order-app", "ledger-app", 30),  # no registry knows ledger-app
        ]
    )
    graph = graph_of(viewer.get("/").content.decode())

    links = dict(re.findall(r'<a class="graph-node" href="([^"]+)" data-service="([^"]+)"', graph))
    assert links == {"/services/user-app/": "user-app", "/services/order-app/": "order-app"}
    assert 'class="graph-node graph-unknown" data-service="ledger-app"' in graph
    # Left to right by call depth.
    x = {
        name: int(at)
        for name, at in re.findall(r'data-service="([^"]+)".*?<rect x="(\d+)"', graph, re.S)
    }
    assert x["user-app"] < x["order-app"] < x["ledger-app"]

    assert (
        '<g class="graph-edge graph-failing" data-caller="user-app" data-callee="order-app">'
        in graph
    )
    edge = re.search(
        r'<text class="graph-label graph-failing" data-caller="user-app" data-callee="order-app"'
        r".*?</text>",
        graph,
        re.S,
    )
    assert edge, "user-app → order-app is not drawn as failing (94.5 % ok)"
    label = [unescape(t) for t in re.findall(r"<tspan[^>]*>([^<]*)</tspan>", edge.group(0))]
    # Over the window: from the start of the minute 5 minutes ago, 300 to 359 s.
    shown_rate = label[0].split(",")[0]
    assert shown_rate in {per_second(660 / s) for s in range(300, 361)}
    assert label[0].endswith(", 94.5 % ok")
    assert label[1].startswith("V1: ") and label[1].endswith(", 99 %")
    assert label[2].startswith("V2 · gray: ") and label[2].endswith(", 50 %")
    assert 'class="graph-edge" data-caller="order-app" data-callee="ledger-app"' in graph

    rows = [
        [unescape(cell) for cell in re.findall(r"<td[^>]*>(.*?)</td>", row)]
        for row in re.findall(r"<tr data-caller.*?</tr>", graph, re.S)
    ]
    assert [row[:2] + row[3:] for row in rows] == [
        ["order-app → ledger-app", "all", "100 %", "30"],
        ["order-app → ledger-app", "V1 · no lane", "100 %", "30"],
        ["user-app → order-app", "all", "94.5 %", "660"],
        ["user-app → order-app", "V1 · no lane", "99 %", "600"],
        ["user-app → order-app", "V2 · gray", "50 %", "60"],
    ]
    assert 'role="group" aria-labelledby="service-graph-title"' in graph
    assert "user-app → order-app: " in unescape(
        re.search(r'<title id="service-graph-title">(.*?)</title>', graph, re.S).group(1)
    )


def test_without_recent_calls_the_overview_says_so(viewer):
    call_graph.record([{**calls("user-app", "order-app", 5), "ts": int(time.time()) - 900}])
    graph = graph_of(viewer.get("/").content.decode())
    assert "No calls between services in the last 5 minutes." in graph
    assert "<svg" not in graph and "<table" not in graph


def test_the_graph_alone_is_for_viewers(viewer, client):
    call_graph.record([calls("user-app", "order-app", 5)])
    alone = viewer.get("/service-graph/")
    assert alone.status_code == 200
    assert 'data-caller="user-app" data-callee="order-app"' in graph_of(alone.content.decode())
    assert "<h1>" not in alone.content.decode()  # the graph only, not a page around it
    signed_out = client.get("/service-graph/")
    assert signed_out.status_code == 302 and "/accounts/login/" in signed_out["Location"]


def test_labels_stay_apart_and_everything_stays_inside_the_drawing():
    """A fan-out with every caller version and lane, a call back up the chain and a call to
    itself: no two edge labels overlap, and every box and label is inside the viewBox."""
    fan = [
        calls("gateway-app", callee, 10, version=version, lane=lane)
        for callee in ("a-app", "b-app", "c-app")
        for version, lane in (("V1", None), ("V2", "gray"), ("V3", "feature-x"), ("V4", None))
    ]
    call_graph.record([*fan, calls("c-app", "gateway-app", 5), calls("b-app", "b-app", 5)])
    drawing = draw(recent_graph())
    # The cycle is cut where the calls turn back: the gateway stays first.
    assert [node.x for node in drawing.nodes if node.name == "gateway-app"] == [PAD]

    boxes = []
    for line in drawing.lines:
        ys = [y for y, _ in line.label]
        width = max(len(text) for _, text in line.label) * 6.5  # 11 px text: at most 6.5 px a char
        left = line.label_x - (width / 2 if line.anchor == "middle" else 0)
        boxes.append((line.caller, line.callee, left, left + width, ys[0] - LINE_H + 3, ys[-1] + 3))
        # The total, FLOW_LINES of the gateway's 4 flows and "+1 more"; else the one flow;
        # a call to itself, above its box, the total only.
        expected = {"gateway-app": FLOW_LINES + 2, "c-app": 2, "b-app": 1}[line.caller]
        assert len(line.label) == expected
    for caller, callee, left, right, top, bottom in boxes:
        assert left >= 0 and right <= drawing.width, (caller, callee)
        assert top >= 0 and bottom <= drawing.height, (caller, callee)
    for i, (*edge, left, right, top, bottom) in enumerate(boxes):
        for *other, l2, r2, t2, b2 in boxes[i + 1 :]:
            apart = right <= l2 or r2 <= left or bottom <= t2 or b2 <= top
            assert apart, f"the labels of {edge} and {other} overlap"
    for node in drawing.nodes:
        assert node.x + node.width <= drawing.width and node.y + node.height <= drawing.height


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (0.25, "0.25/s"),
        (0.333, "0.33/s"),
        (3.45, "3.5/s"),
        (120.4, "120/s"),
        (0.004, "<0.01/s"),
        (0.0, "0/s"),
        (None, "—"),
    ],
)
def test_requests_a_second_read_to_two_figures(value, shown):
    assert per_second(value) == shown
