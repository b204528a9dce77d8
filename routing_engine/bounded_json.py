"""JSON from outside (a form field, a websocket frame), its nesting bounded.

`json.loads` runs out of stack at about a thousand levels of nesting and raises
RecursionError, which no caller expects of bad input; and a value nested nearly that deep
breaks the next code that walks it (str, json.dumps, validation, storage). Nothing read from
outside nests anywhere near MAX_DEPTH, so deeper is refused as malformed (a ValueError).
"""

import json
from typing import Any

MAX_DEPTH = 64


class TooDeep(ValueError):
    def __init__(self, max_depth: int):
        super().__init__(f"JSON nested more than {max_depth} levels deep")


def loads(text: str | bytes, max_depth: int = MAX_DEPTH) -> Any:
    """`json.loads(text)`; ValueError (json.JSONDecodeError or TooDeep) for anything but
    JSON nested at most `max_depth` levels deep."""
    try:
        value = json.loads(text)
    except RecursionError:
        raise TooDeep(max_depth) from None
    if _brackets(text) > max_depth and nests_deeper(value, max_depth):
        raise TooDeep(max_depth)
    return value


def nests_deeper(value: Any, max_depth: int) -> bool:
    """Whether `value` (parsed JSON) has arrays or objects more than `max_depth` deep."""
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if not isinstance(item, dict | list):
            continue
        if depth >= max_depth:
            return True
        children = item.values() if isinstance(item, dict) else item
        stack.extend((child, depth + 1) for child in children)
    return False


def _brackets(text: str | bytes) -> int:
    """An upper bound of the nesting, so ordinary values are not walked at all."""
    if isinstance(text, str):
        return text.count("[") + text.count("{")
    return text.count(b"[") + text.count(b"{")
