"""Values as people read them: stored JSON as JSON (not Python's `True` and dicts) and the
analysis' figures rounded to what they mean. The release page's live rows format the same
figures in static/js/numbers.js: its rules are these, kept in step."""

import json
import math
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from django import template

register = template.Library()

MINUS = "\u2212"


@register.filter
def as_json(value: Any) -> str:
    """One line of JSON, keys sorted: `false`, `null`, `"gray-996"`, `{"a": 1}`."""
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _fixed(value: float, places: int) -> str:
    """`value` to `places` decimals, halves away from zero (as JavaScript's toFixed rounds
    the exact binary value), without trailing zeros."""
    text = str(Decimal(value).quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP))
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text == "-0" else text


@register.filter
def points(value: float | None) -> str:
    """A change in percentage points, signed: "+1.5 pts", "−0.22 pts", "0 pts"."""
    if value is None:
        return "—"
    text = _fixed(value, 2)
    if text == "0":
        return "0 pts"
    return f"{MINUS}{text[1:]} pts" if text.startswith("-") else f"+{text} pts"


@register.filter
def rate(value: float | None) -> str:
    """A percentage to a tenth: "33.3 %", "<0.1 %" for a rate that is there but small."""
    if value is None:
        return "—"
    if 0 < value < 0.05:
        return "<0.1 %"
    return f"{_fixed(value, 1)} %"


@register.filter
def ratio(value: float | None) -> str:
    """A likelihood ratio in two significant digits ("0.53", "3.1", "46"), whole from 10,
    and as "2.3e-4" or "1.2e5" when it is that far from 1."""
    if value is None:
        return "—"
    if value == 0:
        return "0"
    if value < 0.01 or value >= 1000:
        exact = Decimal(value)
        exponent = exact.adjusted()
        mantissa = exact.scaleb(-exponent).quantize(Decimal("0.1"), rounding=ROUND_HALF_UP)
        if mantissa >= 10:  # 9.96e-5 rounds to 1.0e-4
            mantissa, exponent = Decimal("1.0"), exponent + 1
        return f"{mantissa}e{exponent}"
    if value >= 10:
        return _fixed(value, 0)
    return _fixed(value, 1 - math.floor(math.log10(value)))


@register.filter
def p_value(value: float | None) -> str:
    """A p-value: "p=0.03", "p=0.004", "p<0.001"."""
    if value is None:
        return "p=—"
    if value < 0.001:
        return "p<0.001"
    return f"p={_fixed(value, 2 if value >= 0.01 else 3)}"


@register.filter
def words(value: str) -> str:
    """An identifier as words: "insufficient_data" → "insufficient data"."""
    return value.replace("_", " ")


@register.filter
def per_second(value: float | None) -> str:
    """Requests a second to two significant digits, whole from 10: "0.25/s", "3.5/s",
    "120/s", "<0.01/s" for some that round to none."""
    if value is None:
        return "—"
    if 0 < value < 0.005:
        return "<0.01/s"
    return f"{_fixed(value, 2 if value < 1 else 1 if value < 10 else 0)}/s"
