"""The engine's C primitives (routing_engine/_speedups.c) for the tests that run both
implementations: skipped where they are not built, unless REQUIRE_SPEEDUPS=true (CI), which
makes that a failure."""

from __future__ import annotations

import os
from types import ModuleType

import pytest

from routing_engine import matcher


def compiled_or_skip() -> ModuleType:
    compiled = matcher._compiled()
    if compiled is None:
        reason = (
            "routing_engine._speedups is not built (make install) "
            "or GRAYLANE_PURE_PYTHON_ENGINE is set"
        )
        if os.environ.get("REQUIRE_SPEEDUPS") == "true":
            pytest.fail(f"{reason}, and REQUIRE_SPEEDUPS=true: both engines must be tested.")
        pytest.skip(reason)
    return compiled
