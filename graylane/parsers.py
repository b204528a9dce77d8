"""The API's JSON parser: DRF's, refusing with a 400 what would otherwise become a server
error further on:

* nesting deeper than MAX_DEPTH: far deeper than any document here, and at about a
  thousand levels the parser itself, or any code walking the value (validation, error
  messages, storage), runs out of stack (RecursionError);
* strings or keys holding a lone surrogate (`"\\ud800"` is valid JSON, but not Unicode
  text: no database, log line or UTF-8 answer can hold it) or a NUL character (which
  PostgreSQL cannot store), with the field named: `{"users[3]": ["..."]}`.

Both checks cost nothing on ordinary bodies: they walk the parsed value only when the raw
bytes have more brackets than MAX_DEPTH, or a `\\u` escape of a NUL or a surrogate.
"""

import io
import re
from collections.abc import Mapping
from typing import IO, Any

from rest_framework import parsers
from rest_framework.exceptions import ParseError, ValidationError

from routing_engine.bounded_json import MAX_DEPTH

# A surrogate or NUL can only come from an escape: the raw text is strictly decoded UTF-8,
# and a raw control character is not valid JSON.
_SUSPECT_ESCAPE = re.compile(rb"\\u(?:[dD][89a-fA-F][0-9a-fA-F]{2}|0000)")


class JSONParser(parsers.JSONParser):
    def parse(
        self,
        stream: IO[Any],
        media_type: str | None = None,
        parser_context: Mapping[str, Any] | None = None,
    ) -> Any:
        raw = stream.read()
        try:
            data = super().parse(io.BytesIO(raw), media_type, parser_context)
        except RecursionError:
            raise ParseError(f"JSON nested more than {MAX_DEPTH} levels deep.") from None
        if raw.count(b"[") + raw.count(b"{") > MAX_DEPTH or _SUSPECT_ESCAPE.search(raw):
            _check(data)
        return data


def _check(data: Any) -> None:
    """Raises when `data` nests deeper than MAX_DEPTH or holds a string that is not text."""
    stack: list[tuple[Any, str, int]] = [(data, "", 0)]
    while stack:
        value, where, depth = stack.pop()
        if isinstance(value, str):
            _check_text(value, where)
        elif isinstance(value, dict | list):
            if depth >= MAX_DEPTH:
                raise ParseError(f"JSON nested more than {MAX_DEPTH} levels deep.")
            if isinstance(value, dict):
                for key, item in value.items():
                    _check_text(key, where)
                    stack.append((item, f"{where}.{key}" if where else key, depth + 1))
            else:
                stack.extend((item, f"{where}[{i}]", depth + 1) for i, item in enumerate(value))


def _check_text(text: str, where: str) -> None:
    """`where`: the field the text is in (or whose key it is), "" for the body itself."""
    problem = None
    if "\x00" in text:
        problem = "Null characters are not allowed."
    elif not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            problem = "Not valid Unicode text (a lone surrogate)."
    if problem:
        raise ValidationError({where or "non_field_errors": [problem]})
