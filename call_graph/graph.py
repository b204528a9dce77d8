"""The service graph of the recent calls: which service called which, how often and how well,
per caller version and lane, and each service's call depth (the longest chain of calls that
leads to it), by which the dashboard lays the graph out left to right."""

import time
from collections import defaultdict
from dataclasses import dataclass

from django.db.models import Sum

from call_graph.services import edges

# As the overview's traffic split: long enough that a service reporting every 10 s shows.
WINDOW_S = 300


@dataclass(frozen=True)
class Calls:
    """Calls over the window: how many, how many failed, per second and the success rate
    (percent; None without calls)."""

    total: int
    errors: int
    per_s: float
    success_rate: float | None


@dataclass(frozen=True)
class Flow:
    """The calls of one caller version in one lane ("" for PROD and ALL requests)."""

    caller_version: str
    lane: str
    calls: Calls


@dataclass(frozen=True)
class Edge:
    caller: str
    callee: str
    calls: Calls
    flows: list[Flow]  # by caller version, then lane
    back: bool  # closes a cycle (a call to itself too): drawn against the left-to-right flow


@dataclass(frozen=True)
class Graph:
    since: int  # epoch seconds: the start of the window's first minute
    seconds: int  # from `since` to when the graph was read
    depth: dict[str, int]  # every service of an edge, by name
    edges: list[Edge]  # by caller, then callee


def _calls(total: int, errors: int, seconds: int) -> Calls:
    return Calls(
        total=total,
        errors=errors,
        per_s=total / seconds,
        success_rate=100.0 * (total - errors) / total if total else None,
    )


def _back_edges(services: list[str], calls: set[tuple[str, str]]) -> set[tuple[str, str]]:
    """The calls that close a cycle, found depth first from the services nobody calls, then
    from those that call more services than call them (a cycle is cut where the calls turn
    back, not where they come in), by name, so that the rest orders the services."""
    callees: dict[str, list[str]] = defaultdict(list)
    callers: dict[str, int] = defaultdict(int)
    for caller, called_one in sorted(calls):
        callees[caller].append(called_one)
        callers[called_one] += 1
    starts = sorted(services, key=lambda s: (callers[s] > 0, callers[s] - len(callees[s]), s))
    back: set[tuple[str, str]] = set()
    done: set[str] = set()
    on_path: set[str] = set()
    for start in starts:
        if start in done:
            continue
        # Iterative: a long chain of calls must not reach Python's recursion limit.
        stack = [(start, iter(callees[start]))]
        on_path.add(start)
        while stack:
            service, following = stack[-1]
            callee = next(following, None)
            if callee is None:
                stack.pop()
                on_path.discard(service)
                done.add(service)
            elif callee in on_path:
                back.add((service, callee))
            elif callee not in done:
                on_path.add(callee)
                stack.append((callee, iter(callees[callee])))
    return back


def _depths(services: list[str], forward: set[tuple[str, str]]) -> dict[str, int]:
    """The length of the longest chain of `forward` calls (no cycles) that leads to each
    service: 0 for those nobody calls."""
    depth = dict.fromkeys(services, 0)
    waiting = {s: 0 for s in services}
    for _, callee in forward:
        waiting[callee] += 1
    ready = [s for s in services if waiting[s] == 0]
    while ready:
        service = ready.pop()
        for caller, callee in forward:
            if caller == service:
                depth[callee] = max(depth[callee], depth[service] + 1)
                waiting[callee] -= 1
                if waiting[callee] == 0:
                    ready.append(callee)
    return depth


def recent_graph(now: float | None = None, window_s: int = WINDOW_S) -> Graph:
    """The calls of the last `window_s` seconds (whole minutes: from the start of the minute
    `window_s` ago up to `now`)."""
    now = time.time() if now is None else now
    since = int(now - window_s) // 60 * 60
    seconds = max(int(now) - since, 1)
    rows = (
        edges(since)
        .filter(total__gt=0)
        .values("caller", "callee", "caller_version", "lane")
        .annotate(total=Sum("total"), errors=Sum("errors"))
        .order_by("caller", "callee", "caller_version", "lane")
    )
    flows: dict[tuple[str, str], list[Flow]] = defaultdict(list)
    for row in rows:
        flows[row["caller"], row["callee"]].append(
            Flow(row["caller_version"], row["lane"], _calls(row["total"], row["errors"], seconds))
        )
    services = sorted({name for pair in flows for name in pair})
    back = _back_edges(services, set(flows))
    depth = _depths(services, set(flows) - back)
    return Graph(
        since=since,
        seconds=seconds,
        depth=depth,
        edges=[
            Edge(
                caller=caller,
                callee=callee,
                calls=_calls(
                    sum(f.calls.total for f in pair_flows),
                    sum(f.calls.errors for f in pair_flows),
                    seconds,
                ),
                flows=pair_flows,
                back=(caller, callee) in back,
            )
            for (caller, callee), pair_flows in flows.items()
        ],
    )
