"""bounded_json.loads: JSON as json.loads reads it, and nesting beyond the bound refused as
malformed input (ValueError), never a RecursionError."""

import json

import pytest

from routing_engine import bounded_json


def nested(depth: int, kind: str = "[") -> str:
    closing = {"[": "]", "{": "}"}[kind]
    opening = '{"a": ' if kind == "{" else "["
    return opening * depth + ("1" if kind == "{" else "") + closing * depth


@pytest.mark.parametrize("text", ['{"subscribe": ["a", "b"]}', "[[1, 2], {}]", '"x"', "3"])
def test_ordinary_json_reads_as_json_loads_reads_it(text):
    assert bounded_json.loads(text) == json.loads(text)
    assert bounded_json.loads(text.encode()) == json.loads(text)


@pytest.mark.parametrize("kind", ["[", "{"])
def test_the_bound_is_exact(kind):
    assert bounded_json.loads(nested(bounded_json.MAX_DEPTH, kind)) is not None
    with pytest.raises(bounded_json.TooDeep, match="more than 64 levels"):
        bounded_json.loads(nested(bounded_json.MAX_DEPTH + 1, kind))


@pytest.mark.parametrize("depth", [500, 100_000])
def test_far_deeper_is_a_value_error_not_a_recursion_error(depth):
    with pytest.raises(ValueError):
        bounded_json.loads(nested(depth))


def test_brackets_inside_strings_do_not_count_as_nesting():
    text = json.dumps({"note": "[" * 1000})
    assert bounded_json.loads(text) == {"note": "[" * 1000}


def test_malformed_json_is_the_usual_decode_error():
    with pytest.raises(json.JSONDecodeError):
        bounded_json.loads('{"subscribe": [')
