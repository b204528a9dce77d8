"""Waiting for what a test expects by polling it, never for a fixed time: a fixed sleep is
too short on a loaded machine and wasted on an idle one."""

import asyncio
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

INTERVAL = 0.02


def wait_until(
    predicate: Callable[[], T],
    timeout: float = 10.0,
    what: str = "the condition",
    interval: float = INTERVAL,
) -> T:
    """Poll `predicate` until it returns something truthy; that value, or fail."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"Timed out after {timeout:g}s waiting for {what}.")
        time.sleep(interval)


async def async_wait_until(
    predicate: Callable[[], T],
    timeout: float = 10.0,
    what: str = "the condition",
    interval: float = INTERVAL,
) -> T:
    """wait_until inside a test's event loop, which runs between the polls."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"Timed out after {timeout:g}s waiting for {what}.")
        await asyncio.sleep(interval)
