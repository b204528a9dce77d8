"""The order of a bundle's releases: what each member calls (`depends_on`, services of the
same bundle) is released before it, so that a caller at its new version always finds the
callees' new version already there. A bundle that declares no dependencies keeps its listed
order. Calls the services report (call_graph) that go against the order, or that nobody
declared, are shown on the bundle's page."""

from collections.abc import Sequence

from call_graph.services import observed_calls
from releases.models import Release

# The calls a bundle is checked against: those of the last day.
OBSERVED_SECONDS = 86400


class OrderProblem(Exception):
    """Dependencies that cannot be ordered: the messages say why."""

    def __init__(self, messages: list[str]):
        super().__init__(messages)
        self.messages = messages


def dependency_order(members: Sequence[dict]) -> list[dict]:
    """`members` (`{"service", "depends_on": [...], ...}`) ordered callees first; among
    members free to go, the listed order. OrderProblem for an unknown name or a cycle."""
    listed = [member["service"] for member in members]
    unknown = [
        f"{member['service']}: depends_on: {name} is not a service of this bundle."
        for member in members
        for name in member.get("depends_on", [])
        if name not in listed
    ]
    if unknown:
        raise OrderProblem(unknown)
    waiting = {m["service"]: set(m.get("depends_on", [])) for m in members}
    ordered: list[dict] = []
    while waiting:
        ready = next((m for m in members if waiting.get(m["service"]) == set()), None)
        if ready is None:
            raise OrderProblem([f"depends_on goes round in a cycle: {_cycle(waiting)}."])
        ordered.append(ready)
        del waiting[ready["service"]]
        for needs in waiting.values():
            needs.discard(ready["service"])
    return ordered


def _cycle(waiting: dict[str, set[str]]) -> str:
    """One cycle among members that all wait for another, as `a → b → a`."""
    path = [min(waiting)]
    while path[-1] not in path[:-1]:
        path.append(min(waiting[path[-1]]))
    return " → ".join(path[path.index(path[-1]) :])


def order_warnings(members: Sequence[Release], now: float) -> list[str]:
    """The calls between members seen in the last OBSERVED_SECONDS that contradict the
    bundle's order (a callee released after its caller) or, when the bundle declares
    dependencies, that none declares."""
    position = {member.service: member.position for member in members}
    declared = {(member.service, name) for member in members for name in member.depends_on}
    warnings = []
    for caller, callee in sorted(observed_calls(position, int(now) - OBSERVED_SECONDS)):
        if caller == callee:
            continue
        if position[callee] > position[caller]:
            warnings.append(
                f"{caller} calls {callee}, but {callee} is released after {caller}: declare "
                f"{callee} in {caller}'s depends_on."
            )
        elif declared and (caller, callee) not in declared:
            warnings.append(f"{caller} calls {callee}, which {caller}'s depends_on does not name.")
    return warnings
