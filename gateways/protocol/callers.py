"""Who is polling: a gateway's identity by its token's hash, remembered by this process, so
that a poll does not read its caller's row every time (with 5,000 gateways polling after
every publish, reading the callers' rows was 16 % of a replica's CPU: bench/fleet.py).

Only polls use it (`call_batch.answer`); an ack posted to the ack endpoint reads the row
as before (its answer says what the row holds). What is remembered is what a poll needs:
the gateway's pk, name, mode and creation time, and when this process last knew it seen.

A token stops working, and a renamed gateway's polls say its new name:

* in the process that changed or deleted the gateway (`post_save`, `post_delete`:
  wakeup.on_gateway_changed), at once and again once the change commits;
* in every other process with REDIS_URL set, as soon as Redis delivers the message
  published after that commit (GATEWAY_CHANGED_CHANNEL, heard by the wake-up relay of
  protocol/wakeup.py: milliseconds on one network);
* a message Redis lost, or a change that bypasses the ORM's signals (a queryset
  `update()` of a name, SQL by hand), within ENTRY_SECONDS: every entry is read again
  after that long;
* while no relay of this process listens (Redis unreachable, or not yet subscribed),
  nothing remembered is used: every poll reads its row, as before; and what was remembered
  before the relay (re)subscribed is forgotten, since messages may have been missed.

A row read while a change commits is not remembered: each forgetting moves an epoch, and
a read remembers its rows only if the epoch has not moved since it started.
"""

import threading
import time
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings

from gateways.models import Gateway

# The bound for changes that bypass the ORM's signals; each gateway's row is read once per
# this long (at 5,000 gateways and a publish every few seconds: once in tens of publishes).
ENTRY_SECONDS = 60.0
IDENTITY_FIELDS = frozenset({"name", "mode", "token_hash", "created_at"})


@dataclass(eq=False)
class Caller:
    pk: int
    name: str
    mode: str
    created_at: datetime
    last_seen: datetime | None  # as this process last read or wrote it
    expires: float  # time.monotonic()

    @classmethod
    def of(cls, gateway: Gateway) -> "Caller":
        expires = time.monotonic() + ENTRY_SECONDS
        return cls(
            gateway.pk, gateway.name, gateway.mode, gateway.created_at, gateway.last_seen, expires
        )

    def is_stale(self, now: datetime) -> bool:
        return Gateway.stale(self.mode, self.last_seen, self.created_at, now)


_lock = threading.Lock()
_callers: dict[str, Caller] = {}  # token hash -> caller
_epoch = 0
# Relays of this process subscribed to the changes channel now. With Redis configured, what
# is remembered is used only while one listens (without Redis, one process does it all).
_listening = 0


def trusted() -> bool:
    return not settings.REDIS_URL or _listening > 0


def epoch() -> int:
    return _epoch


def known(token_hash: str) -> Caller | None:
    """The remembered caller with this token hash, if it may be used now."""
    caller = _callers.get(token_hash)
    if caller is None or not trusted():
        return None
    if caller.expires <= time.monotonic():
        return None
    return caller


def remember(callers: dict[str, Caller], since_epoch: int) -> None:
    """Remember these callers (by token hash), read from rows when the epoch was
    `since_epoch`: not if anything was forgotten since (the rows may be older than that)."""
    with _lock:
        if _epoch == since_epoch and trusted():
            _callers.update(callers)


def forget(pk: int | None = None) -> None:
    """Forget the gateway with this pk (every gateway when None)."""
    global _epoch
    with _lock:
        _epoch += 1
        if pk is None:
            _callers.clear()
        else:
            for token_hash in [h for h, c in _callers.items() if c.pk == pk]:
                del _callers[token_hash]


def listening(now: bool) -> None:
    """A relay of this process subscribed (True) or stopped listening (False); either way
    what it may have missed is forgotten."""
    global _listening
    with _lock:
        _listening += 1 if now else -1
    forget()


def heard(message: bytes) -> None:
    """A message of GATEWAY_CHANGED_CHANNEL: the pk of a gateway changed or deleted."""
    try:
        pk = int(message)
    except ValueError:
        pk = None  # not ours to read: forget them all rather than guess
    forget(pk)
