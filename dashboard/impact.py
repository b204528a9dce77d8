"""The impact preview (traffic.impact) in words, as the editors show it before publish."""

from typing import Any


def _percent(share: float) -> str:
    return f"{share * 100:.3g} %"


def impact_lines(preview: dict[str, Any]) -> list[str]:
    """One line per service the draft moves requests of, then one per rule entry that
    matched no sample: "moves 3.2 % of user-app requests (41 users) to V2", "city `Paris`
    matched nothing in 15 minutes"."""
    if not preview["samples"]:
        return ["No samples in the window: nothing to preview the change on."]
    window = f"{preview['window_s'] // 60} minutes"
    lines = []
    for name, service in preview["services"].items():
        if not service["moved"]:
            continue
        now, draft = service["now"], service["draft"]
        gaining = [version for version, share in draft.items() if share > now.get(version, 0)]
        users = service["users_moved"]
        lines.append(
            f"moves {_percent(service['moved'])} of {name} requests "
            f"({users} user{'' if users == 1 else 's'}) to {', '.join(gaining) or 'other versions'}"
        )
    if not lines:
        lines.append(f"moves none of the {preview['samples']} sampled requests")
    for rule in preview["rules"]:
        if not rule["matched"]:
            lane = "" if rule["lane"] == "gray" else f"lane {rule['lane']}: "
            lines.append(f"{lane}{rule['rule']} `{rule['value']}` matched nothing in {window}")
    return lines
