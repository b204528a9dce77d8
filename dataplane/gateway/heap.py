"""Giving the system back the free memory inside the C heap (glibc's malloc; elsewhere this
does nothing).

Why, when nothing is kept: glibc returns heap memory only from the heap's top. Busy
connections leave their freed buffers spread through the heap, and one small allocation
that outlives them near its top (a pooled connection, a metrics window, the HTTP client's
buffers) keeps all of that free memory resident. Measured with 200 slow uploads on a busy
machine (tests/test_gateway_limits.py): after the clients had gone, the heap's allocations
were back to what they had been before, 8.3 MiB, and the heap still held 19 MiB, 11 MiB of
it free, 30 s later. What the gateway itself held for those uploads (bodies kept for a
second sending, connections waiting for a full collection) is bounded or freed at once
where it is held (replay.py, proxy.py); what is left is the allocator's, and only
`malloc_trim` gives it back.

Every 10 s, not every second: a trimmed page costs a page fault when the heap grows into it
again, and under load the heap's free memory is past 4 MiB at nearly every look (trimmed
every second, it was trimmed 5 times in 6 s of bench/gateway.py's load).
"""

from __future__ import annotations

import asyncio
import ctypes
import logging

log = logging.getLogger(__name__)

# Free heap bytes that are worth a trim, and how often they are looked at.
TRIM_AT = 4 << 20
TRIM_EVERY = 10.0


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        )
    ]


def _glibc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL(None)  # the C library this process runs on
        libc.mallinfo2.restype = _MallInfo2
        libc.malloc_trim.argtypes = [ctypes.c_size_t]
    except (OSError, AttributeError):
        return None  # not glibc (2.33 or later): nothing to do
    return libc


_LIBC = _glibc()


def free_heap() -> int | None:
    """Bytes free inside the heap (None without glibc)."""
    return None if _LIBC is None else _LIBC.mallinfo2().fordblks


def give_back_free_heap() -> bool:
    """Return the heap's free pages to the system, if there are TRIM_AT of them."""
    free = free_heap()
    if free is None or free < TRIM_AT:
        return False
    assert _LIBC is not None
    _LIBC.malloc_trim(0)
    log.debug("Gave back up to %.1f MiB of free heap.", free / (1 << 20))
    return True


async def keep_giving_back_free_heap() -> None:
    while True:
        await asyncio.sleep(TRIM_EVERY)
        give_back_free_heap()
