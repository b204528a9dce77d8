"""Shadow traffic (docs/gateway-protocol.md, "Shadow traffic"): a share of a service's PROD
requests of idempotent methods is copied to an instance of its mirror version, with
`X-Gray-Shadow: true`, once the client has its answer. The copy's answer is compared with
prod's (status class, latency, blake2b of the first BODY_HASH_LIMIT bytes of the body) and
dropped; the comparisons are counted per (service, prod version, mirror version, path) and
sent to the dashboard (`POST /api/v1/shadow-comparisons/`).

The client never waits for a copy: a copy starts after its answer went out, runs as a task
of its own on a connection of the copies' own (kept alive, a few per mirror instance; never
the proxy's pool, whose connections a copy must not hold), and at most `max_in_flight` run
at once; a copy over that is dropped and counted. A copy counts in no metric: it never goes
through the proxy's `finished`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from hashlib import blake2b
from typing import Any, cast

import httptools

from routing_engine.mirror import MIRRORED_METHODS, mirror_bucket
from routing_engine.records import Instance

log = logging.getLogger(__name__)

# Bodies are compared by a hash of their first bytes: enough to tell two answers apart
# without reading a large one whole.
BODY_HASH_LIMIT = 1 << 20
# Per report, the paths counted per (service, mirror version); later ones count as OTHER.
MAX_PATHS = 100
OTHER = "(other)"
# Per (service, versions, path) and report, the latency pairs sent (the first ones).
MAX_LATENCY_PAIRS = 20
SHADOW_LINE = b"x-gray-shadow: true\r\n"
# Kept-alive connections to mirror instances, per address: a copy costs no connect then.
IDLE_PER_ADDRESS = 8


def status_class(status: int) -> str:
    """`2xx`..`5xx`, or `error` for a copy that got no answer."""
    return f"{status // 100}xx" if 100 <= status < 600 else "error"


@dataclass(slots=True)
class Mirror:
    """A service's mirror, compiled once per generation: the version copies go to and its
    instances, and how many of 10,000 buckets are copied."""

    version: str
    threshold: int
    instances: list[Instance]
    next: int = 0

    def pick(self) -> Instance:
        instance = self.instances[self.next % len(self.instances)]
        self.next += 1
        return instance


class BodyHash:
    """blake2b of an answer's first BODY_HASH_LIMIT bytes, fed as they pass."""

    __slots__ = ("digest", "left")

    def __init__(self) -> None:
        self.digest = blake2b(digest_size=16)
        self.left = BODY_HASH_LIMIT

    def feed(self, data: bytes) -> None:
        if self.left > 0:
            piece = data[: self.left]
            self.digest.update(piece)
            self.left -= len(piece)

    def hexdigest(self) -> str:
        return self.digest.hexdigest()


@dataclass(slots=True)
class Copy:
    """A request chosen for a copy, while prod answers it."""

    service: str
    prod_version: str
    path: str
    head: bytes
    mirror: Mirror
    prod_body: BodyHash = field(default_factory=BodyHash)


def chosen(
    mirror: Mirror | None,
    method: bytes,
    url: bytes,
    has_body: bool,
    client: bytes,
) -> bool:
    """Whether a PROD request is copied: an idempotent method without a body, in the
    mirror's share by its stable bucket."""
    return (
        mirror is not None
        and method in MIRRORED_METHODS
        and not has_body
        and mirror_bucket(method, url, client) < mirror.threshold
    )


def shadow_head(head: bytes, method: bytes) -> bytes:
    """The prod request's head, marked as a copy. The answer to HEAD has no body whatever its
    Content-Length says, which the parser cannot know: that connection is closed after it."""
    close = b"connection: close\r\n" if method == b"HEAD" else b""
    return head[:-2] + SHADOW_LINE + close + b"\r\n"


class ShadowStats:
    """The comparisons since the last report."""

    def __init__(self) -> None:
        self._entries: dict[tuple[str, str, str, str], dict[str, Any]] = {}
        self._paths: dict[tuple[str, str], set[str]] = {}
        self.dropped = 0

    def add(
        self,
        copy: Copy,
        prod: tuple[int, float, str],
        mirror: tuple[int, float, str],
    ) -> None:
        paths = self._paths.setdefault((copy.service, copy.mirror.version), set())
        path = copy.path
        if path not in paths:
            if len(paths) >= MAX_PATHS:
                path = OTHER
            else:
                paths.add(path)
        key = (copy.service, copy.prod_version, copy.mirror.version, path)
        entry = self._entries.get(key)
        if entry is None:
            entry = self._entries[key] = {
                "service": copy.service,
                "prod_version": copy.prod_version,
                "version": copy.mirror.version,
                "path": path,
                "total": 0,
                "classes": {},
                "body_mismatched": 0,
                "latency_ms": [],
            }
        prod_class, mirror_class = status_class(prod[0]), status_class(mirror[0])
        entry["total"] += 1
        counts = entry["classes"].setdefault(prod_class, {"total": 0, "mismatched": 0})
        counts["total"] += 1
        differs = prod_class != mirror_class
        if differs:
            counts["mismatched"] += 1
        elif prod[2] != mirror[2]:
            entry["body_mismatched"] += 1
            differs = True
        if differs:  # the last one seen, as an example
            entry["example"] = {"prod_status": prod[0], "mirror_status": mirror[0]}
        if len(entry["latency_ms"]) < MAX_LATENCY_PAIRS:
            entry["latency_ms"].append([round(prod[1], 3), round(mirror[1], 3)])

    def flush(self) -> tuple[list[dict[str, Any]], int]:
        entries, self._entries, self._paths = list(self._entries.values()), {}, {}
        dropped, self.dropped = self.dropped, 0
        return entries, dropped


class _CopyConnection(asyncio.Protocol):
    """A connection to a mirror instance: one copy at a time, its answer parsed as it comes
    (httptools' callbacks), kept alive for the next copy when the answer allows."""

    def __init__(self, shadower: Shadower, address: tuple[str, int]) -> None:
        self.shadower = shadower
        self.address = address
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.copy: Copy | None = None
        self.prod: tuple[int, float, str] = (0, 0.0, "")
        self.body = BodyHash()
        self.started = 0.0
        self.timer: asyncio.TimerHandle | None = None

    def send(self, copy: Copy, prod: tuple[int, float, str]) -> None:
        assert self.transport is not None
        self.copy, self.prod, self.body = copy, prod, BodyHash()
        self.started = time.perf_counter()
        self.timer = asyncio.get_running_loop().call_later(
            self.shadower.timeout, self.transport.close
        )
        self.transport.write(copy.head)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError:
            self._over(0)
            self._close()

    def on_body(self, data: bytes) -> None:
        self.body.feed(data)

    def on_message_complete(self) -> None:
        keep = self.parser.should_keep_alive()
        self._over(self.parser.get_status_code())
        if keep and self.transport is not None and not self.transport.is_closing():
            self.shadower.idle(self)
        else:
            self._close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        # Closed before the answer ended: one without framing (or to HEAD) ends here.
        self._over(self.parser.get_status_code() if self.started else 0)
        self.shadower.forget(self)

    def _over(self, status: int) -> None:
        copy, self.copy = self.copy, None
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if copy is None:
            return
        latency = (time.perf_counter() - self.started) * 1000
        self.started = 0.0
        self.shadower.done(copy, self.prod, (status, latency, self.body.hexdigest()))
        self.parser = httptools.HttpResponseParser(self)

    def _close(self) -> None:
        if self.transport is not None:
            self.transport.close()


class Shadower:
    def __init__(self, max_in_flight: int = 64, timeout: float = 30.0) -> None:
        self.max_in_flight = max_in_flight
        self.timeout = timeout
        self.in_flight = 0
        self.stats = ShadowStats()
        self._idle: dict[tuple[str, int], list[_CopyConnection]] = {}
        self._open: set[_CopyConnection] = set()
        self._connecting: set[asyncio.Task] = set()

    def launch(self, copy: Copy, prod_status: int, prod_latency_ms: float) -> None:
        """Send the copy, in the background; dropped when max_in_flight copies run."""
        if self.in_flight >= self.max_in_flight:
            self.stats.dropped += 1
            return
        self.in_flight += 1
        prod = (prod_status, prod_latency_ms, copy.prod_body.hexdigest())
        address = copy.mirror.pick().address
        idle = self._idle.get(address, [])
        while idle:
            connection = idle.pop()
            # One the instance closed while idle may not have heard of it yet.
            if connection.transport is not None and not connection.transport.is_closing():
                connection.send(copy, prod)
                return
        task = asyncio.get_running_loop().create_task(self._connect(address, copy, prod))
        self._connecting.add(task)  # a task only weakly referenced by the loop may vanish
        task.add_done_callback(self._connecting.discard)

    async def _connect(
        self, address: tuple[str, int], copy: Copy, prod: tuple[int, float, str]
    ) -> None:
        loop = asyncio.get_running_loop()
        try:
            _, connection = await asyncio.wait_for(
                loop.create_connection(lambda: _CopyConnection(self, address), *address),
                self.timeout,
            )
        except (OSError, TimeoutError) as exc:
            log.debug("shadow copy of %s failed: %s", copy.path, exc)
            self.done(copy, prod, (0, self.timeout * 1000, ""))
            return
        self._open.add(connection)
        connection.send(copy, prod)

    def done(
        self, copy: Copy, prod: tuple[int, float, str], mirror: tuple[int, float, str]
    ) -> None:
        self.in_flight -= 1
        self.stats.add(copy, prod, mirror)

    def idle(self, connection: _CopyConnection) -> None:
        idle = self._idle.setdefault(connection.address, [])
        if len(idle) < IDLE_PER_ADDRESS:
            idle.append(connection)
        else:
            connection._close()

    def forget(self, connection: _CopyConnection) -> None:
        self._open.discard(connection)
        idle = self._idle.get(connection.address, [])
        if connection in idle:
            idle.remove(connection)

    async def close(self) -> None:
        for task in list(self._connecting):
            task.cancel()
        await asyncio.gather(*self._connecting, return_exceptions=True)
        for connection in list(self._open):
            connection._close()
