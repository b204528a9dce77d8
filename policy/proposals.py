"""A change not published: the live document as a draft of the policy and lanes would make
it, validated as publishing them would be (the impact preview runs it over sampled traffic)."""

from collections.abc import Mapping
from typing import Any

from policy.lanes import lanes_of
from policy.services import with_lane, with_new_lane, with_policy
from routing_engine import NON_FIELD_ERRORS, PolicyError
from routing_engine.lanes import GRAY_LANE, lane_errors_prefixed, lane_name_problem

# What a GET of the policy or of a lane answers beside the fields themselves: a draft made
# of one sent back as it is carries them, and they are not part of it.
NOT_POLICY_FIELDS = {"revision", "comment", "updated_at", "updated_by", "freeze_override"}
NOT_LANE_FIELDS = NOT_POLICY_FIELDS | {"name", "builtin"}


def draft_document(
    document: dict[str, Any], policy: Any = None, lanes: Any = None, actor: str = ""
) -> dict[str, Any]:
    """`document` with `policy` (the fields of a policy PUT) and `lanes` (lanes as the lanes
    API takes them, each with its `name`: a lane of that name is replaced, `gray` is the
    policy's lane, any other name is a new lane) applied in that order. PolicyError with every
    problem, named `policy.<field>` and `lanes.<name>.<field>`."""
    errors: dict[str, list[str]] = {}
    if policy is not None:
        try:
            document = with_policy(document, _fields(policy, NOT_POLICY_FIELDS), partial=False)
        except PolicyError as exc:
            errors.update(lane_errors_prefixed(exc, "policy").errors)
    if lanes is not None and not isinstance(lanes, list):
        errors["lanes"] = ["Must be a list of lanes, each with its name."]
        lanes = []
    for index, lane in enumerate(lanes or []):
        name = lane.get("name") if isinstance(lane, Mapping) else None
        label = f"lanes.{name if lane_name_problem(name) is None else index}"
        try:
            if not isinstance(lane, Mapping) or not isinstance(name, str):
                raise PolicyError({"name": ["Each lane is an object with its name."]})
            fields = _fields(lane, NOT_LANE_FIELDS)
            if name == GRAY_LANE or name in lanes_of(document):
                document = with_lane(document, name, fields, partial=False, actor=actor)
            else:
                document = with_new_lane(document, name, fields, actor)
        except PolicyError as exc:
            errors.update(lane_errors_prefixed(exc, label).errors)
    if errors:
        raise PolicyError(errors)
    return document


def _fields(data: Any, ignored: set[str]) -> Any:
    if not isinstance(data, Mapping):
        raise PolicyError({NON_FIELD_ERRORS: ["Expected a JSON object."]})
    return {key: value for key, value in data.items() if key not in ignored}
