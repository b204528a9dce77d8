"""A release's states and which action may move it where (plain data, no Django)."""

PENDING = "pending"
SCHEDULED = "scheduled"
RUNNING = "running"
PAUSED = "paused"
INSUFFICIENT_DATA = "insufficient_data"
AWAITING_APPROVAL = "awaiting_approval"
PROMOTED = "promoted"
ROLLED_BACK = "rolled_back"
ABORTED = "aborted"
FAILED = "failed"

STATES = [
    PENDING,
    SCHEDULED,
    RUNNING,
    PAUSED,
    INSUFFICIENT_DATA,
    AWAITING_APPROVAL,
    PROMOTED,
    ROLLED_BACK,
    ABORTED,
    FAILED,
]
# States in which the release owns its service's routing in its lane: at most one per
# service and lane. Awaiting approval, it keeps the routing of the step before.
ACTIVE = (RUNNING, PAUSED, INSUFFICIENT_DATA, AWAITING_APPROVAL)
FINISHED = (PROMOTED, ROLLED_BACK, ABORTED, FAILED)
# States the analysis works in (paused: the operator holds it).
ANALYSED = (RUNNING, INSUFFICIENT_DATA)

# action -> the states it may be taken in.
# `start` in `scheduled`: now, not at its time.
ACTIONS: dict[str, tuple[str, ...]] = {
    "start": (PENDING, SCHEDULED),
    "pause": (RUNNING, INSUFFICIENT_DATA, AWAITING_APPROVAL),
    "resume": (PAUSED,),
    "promote": (RUNNING, PAUSED, INSUFFICIENT_DATA),
    "approve": (AWAITING_APPROVAL,),
    "rollback": ACTIVE,
    "abort": (PENDING, SCHEDULED, *ACTIVE),
}


def allowed_actions(state: str) -> list[str]:
    return [action for action, states in ACTIONS.items() if state in states]


def bundle_allowed_actions(found: list[str]) -> list[str]:
    """What a bundle whose releases are in these states allows: the actions every release
    not finished yet allows (none once all are finished)."""
    live = [state for state in found if state not in FINISHED]
    return [action for action, ok in ACTIONS.items() if live and all(s in ok for s in live)]


def common_state(found: list[str]) -> str:
    """A bundle's state: its releases' common one, or `mixed`."""
    return found[0] if found and len(set(found)) == 1 else "mixed"
