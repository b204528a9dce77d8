"""What a request keeps of its body for a second sending (docs/gateway.md, Retries): up to
REPLAY_LIMIT of it, while all requests together keep at most REPLAY_BUDGET.

The first piece of a body is kept as it came. Once a second one arrives, the pieces are
copied into an anonymous memory map instead, out of the heap. A slow upload keeps its body
for as long as it takes: kept as objects on the heap, a few KiB each, among everything else
allocated meanwhile, 200 such bodies spread the heap over tens of MiB that the allocator
cannot give back to the system once they are freed (the heap shrinks only from its top). A
map goes back to the system whole when it is closed.
"""

from __future__ import annotations

import mmap

# Bodies up to this size can be sent again to another instance; a longer one is streamed
# through and not retried once any of it went out.
REPLAY_LIMIT = 1 << 20
# What all requests together keep: past it, a body is streamed through as a longer one is.
# 200 uploads of 1 MiB at once would otherwise hold 200 MiB.
REPLAY_BUDGET = 16 << 20


class ReplayBudget:
    """The body bytes all requests keep, against REPLAY_BUDGET."""

    __slots__ = ("held",)

    def __init__(self) -> None:
        self.held = 0


class KeptBody:
    """What went out of one request's body, kept for a second sending."""

    __slots__ = ("budget", "first", "map", "size")

    def __init__(self, budget: ReplayBudget) -> None:
        self.budget = budget
        self.first = b""
        self.map: mmap.mmap | None = None
        self.size = 0

    def keep(self, data: bytes) -> bool:
        """Keep `data` after what is kept. False, and nothing kept from then on, when that
        would pass REPLAY_LIMIT or the budget."""
        length = len(data)
        if self.size + length > REPLAY_LIMIT or self.budget.held + length > REPLAY_BUDGET:
            self.drop()
            return False
        if not self.size:
            self.first = data
        else:
            if self.map is None:
                self.map = mmap.mmap(-1, REPLAY_LIMIT)
                self.map.write(self.first)
                self.first = b""
            self.map.write(data)
        self.size += length
        self.budget.held += length
        return True

    def take(self) -> bytes:
        """All that is kept, which is then no longer kept."""
        data = self.first if self.map is None else self.map[: self.size]
        self.drop()
        return data

    def drop(self) -> None:
        if self.map is not None:
            self.map.close()
            self.map = None
        self.first = b""
        self.budget.held -= self.size
        self.size = 0
