"""Values as people read them: stored JSON as JSON, not Python's `True` and dicts."""

import json
from typing import Any

from django import template

register = template.Library()


@register.filter
def as_json(value: Any) -> str:
    """One line of JSON, keys sorted: `false`, `null`, `"gray-996"`, `{"a": 1}`."""
    return json.dumps(value, ensure_ascii=False, sort_keys=True)
