# Types of the C primitives (_speedups.c); routing_engine/matcher.py has them in Python too.
from collections.abc import Mapping
from typing import Any

from .matcher import Decision

class HeaderPicker:
    spellings: dict[str, str | None]
    def __init__(self, wanted: frozenset[str], limit: int) -> None: ...
    def __call__(self, headers: Mapping[str, str]) -> dict[str, str]: ...

class Probe:
    def __init__(self, *tables: Any) -> None: ...
    def __call__(
        self,
        headers: Mapping[str, str],
        ip: str | None = None,
        city: str | None = None,
        user: str | None = None,
    ) -> Decision: ...
