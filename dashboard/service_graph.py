"""The service graph (call_graph.graph) drawn for templates/dashboard/_service_graph.html:
services as boxes in columns by call depth, calls as curves labelled with their figures.
Every coordinate is an SVG attribute worked out here, since the Content-Security-Policy
allows no inline style; the SVG scales down to a narrower card by its viewBox (on a phone it
scrolls in its box instead: static/css/app.css)."""

from dataclasses import dataclass

from call_graph.graph import Calls, Edge, Graph
from registry_sync.models import Service

from .templatetags.display import per_second, rate
from .templatetags.service_links import service_url

NODE_W, NODE_H = 136, 34
# Between columns: room for an edge's label (LABEL_CHARS at the label's font size).
GAP = 196
PAD = 12
LINE_H = 13
LABEL_CHARS = 30
NAME_CHARS = 18
# An edge's label lists this many caller versions and lanes; the table lists them all.
FLOW_LINES = 3
# Below this success rate an edge is drawn as failing.
FAILING_BELOW = 99.0


@dataclass(frozen=True)
class Node:
    name: str
    label: str  # the name, shortened to fit its box
    url: str  # "" for a service the registries do not know: it has no page
    x: int
    y: int
    width: int = NODE_W
    height: int = NODE_H

    @property
    def text_x(self) -> int:
        return self.x + self.width // 2

    @property
    def text_y(self) -> int:
        return self.y + self.height // 2 + 4  # the baseline that centres a 12 px name


@dataclass(frozen=True)
class Line:
    caller: str
    callee: str
    path: str  # SVG path data
    label_x: int
    anchor: str  # the label's text-anchor: "start" or "middle" of label_x
    label: list[tuple[int, str]]  # each line's baseline and text
    title: str  # every flow, in full
    failing: bool


@dataclass(frozen=True)
class Row:
    """A line of the table that says what the drawing shows: an edge's calls, then each
    caller version's in each lane."""

    caller: str
    callee: str
    flow: str  # "all", or the caller version and lane ("no lane": PROD and ALL requests)
    per_s: str
    success: str
    total: int
    is_edge: bool


@dataclass(frozen=True)
class Drawing:
    width: int
    height: int
    nodes: list[Node]
    lines: list[Line]
    rows: list[Row]
    minutes: int  # the window, as the page names it


def _short(text: str, chars: int) -> str:
    return text if len(text) <= chars else text[: chars - 1] + "…"


def _figures(calls: Calls) -> str:
    return f"{per_second(calls.per_s)}, {rate(calls.success_rate)}"


def _flow_name(version: str, lane: str) -> str:
    return f"{version} · {lane}" if lane else version


def _label(edge: Edge) -> list[str]:
    lines = [_figures(edge.calls) + " ok"]
    for flow in edge.flows[:FLOW_LINES]:
        lines.append(
            _short(
                f"{_flow_name(flow.caller_version, flow.lane)}: {_figures(flow.calls)}", LABEL_CHARS
            )
        )
    if len(edge.flows) > FLOW_LINES:
        lines.append(f"+{len(edge.flows) - FLOW_LINES} more in the table")
    return lines


def _columns(graph: Graph) -> list[list[str]]:
    """Services by depth, each column ordered by the mean row of its callers in the columns
    before it (fewer crossings), then by name."""
    columns: list[list[str]] = [[] for _ in range(max(graph.depth.values()) + 1)]
    for name in sorted(graph.depth):
        columns[graph.depth[name]].append(name)
    row: dict[str, int] = {}
    callers: dict[str, list[str]] = {name: [] for name in graph.depth}
    for edge in graph.edges:
        callers[edge.callee].append(edge.caller)

    def place(name: str) -> tuple[float, str]:
        placed = [row[caller] for caller in callers[name] if caller in row]
        return (sum(placed) / len(placed) if placed else 0.0, name)

    for column in columns:
        column.sort(key=place)
        row.update((name, i) for i, name in enumerate(column))
    return columns


def draw(graph: Graph) -> Drawing:
    """Without calls in the window: no nodes, for the page to say so."""
    minutes = graph.seconds // 60
    if not graph.edges:
        return Drawing(0, 0, [], [], [], minutes)
    labels = {(e.caller, e.callee): _label(e) for e in graph.edges}
    label_h = max(len(lines) for lines in labels.values()) * LINE_H
    # Two edges out of one box end a row apart, their labels half a row: room for both.
    pitch = max(NODE_H + 24, 2 * label_h + 8)
    columns = _columns(graph)
    known = set(Service.objects.filter(name__in=graph.depth).values_list("name", flat=True))
    at: dict[str, tuple[int, int]] = {}
    nodes = []
    for depth, column in enumerate(columns):
        for row, name in enumerate(column):
            x, y = PAD + depth * (NODE_W + GAP), PAD + row * pitch + (pitch - NODE_H) // 2
            at[name] = (x, y)
            url = service_url(name) if name in known else ""
            nodes.append(Node(name, _short(name, NAME_CHARS), url, x, y))
    lines = []
    for edge in graph.edges:
        (x1, y1), (x2, y2) = at[edge.caller], at[edge.callee]
        text = labels[edge.caller, edge.callee]
        if edge.caller == edge.callee:
            # A loop off the box's right side; above the box, room for the total only (the
            # table and the tooltip have the rest).
            x, top, bottom = x1 + NODE_W, y1 + 8, y1 + NODE_H - 8
            path = f"M{x} {top} C{x + 24} {top - 12} {x + 24} {bottom + 12} {x} {bottom}"
            text = text[:1]
            label_x, anchor, label_top = x1 + NODE_W // 2, "middle", y1 - 4 - LINE_H
        elif edge.back:
            # Against the flow: under the boxes, from the caller's bottom to the callee's,
            # its label under the curve's lowest point.
            a, b = x1 + NODE_W // 2, x2 + NODE_W // 2
            bottom = max(y1, y2) + NODE_H
            low = bottom + pitch // 2
            path = f"M{a} {y1 + NODE_H} C{a} {low} {b} {low} {b} {y2 + NODE_H}"
            # A cubic's lowest point is 3/4 of the way to its control points.
            label_x, anchor, label_top = (a + b) // 2, "middle", bottom + 3 * pitch // 8 + 4
        else:
            a, b = x1 + NODE_W, x2
            ya, yb = y1 + NODE_H // 2, y2 + NODE_H // 2
            bend = (b - a) // 2
            path = f"M{a} {ya} C{a + bend} {ya} {b - bend} {yb} {b} {yb}"
            # Above the curve's middle: the labels of two edges out of one box are half a
            # row apart there, room for one.
            label_x, anchor, label_top = (
                (a + b) // 2,
                "middle",
                (ya + yb) // 2 - 4 - len(text) * LINE_H,
            )
        flows = "; ".join(
            f"{_flow_name(f.caller_version, f.lane or 'no lane')}: {_figures(f.calls)}"
            for f in edge.flows
        )
        lines.append(
            Line(
                caller=edge.caller,
                callee=edge.callee,
                path=path,
                label_x=label_x,
                anchor=anchor,
                label=[(label_top + (i + 1) * LINE_H - 3, line) for i, line in enumerate(text)],
                title=f"{edge.caller} → {edge.callee}: {_figures(edge.calls)} ok ({flows})",
                failing=edge.calls.success_rate is not None
                and edge.calls.success_rate < FAILING_BELOW,
            )
        )
    rows = [
        Row(
            edge.caller,
            edge.callee,
            flow,
            per_second(calls.per_s),
            rate(calls.success_rate),
            calls.total,
            is_edge,
        )
        for edge in graph.edges
        for flow, calls, is_edge in [
            ("all", edge.calls, True),
            *(
                (_flow_name(f.caller_version, f.lane or "no lane"), f.calls, False)
                for f in edge.flows
            ),
        ]
    ]
    tallest = max(len(column) for column in columns)
    # Under the lowest boxes: the curves of calls back up the chain, and their labels.
    back_room = (
        max(0, 3 * pitch // 8 + 4 + label_h - (pitch - NODE_H) // 2)
        if any(e.back and e.caller != e.callee for e in graph.edges)
        else 0
    )
    loop_room = 24 if any(e.caller == e.callee for e in graph.edges) else 0
    return Drawing(
        width=2 * PAD + len(columns) * NODE_W + (len(columns) - 1) * GAP + loop_room,
        height=2 * PAD + tallest * pitch + back_room,
        nodes=nodes,
        lines=lines,
        rows=rows,
        minutes=minutes,
    )
