"""Per-version metrics behind an engine: its JSON access log (one line per client request,
written by Envoy's file access logger or nginx's `log_format ... escape=json`), tailed and
counted into the Python gateway's Metrics, which its Reporter sends to the dashboard.

A log line names the service, the flag, the lane (of a GRAY request) and the instance
that answered last (after retries); the version is that instance's in the generation in
force, or, when no instance answered (a 503 without one), the version the route asked for.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from pathlib import Path

from dataplane.agent.ir import Generation
from dataplane.gateway.metrics import Metrics
from dataplane.gateway.routing import route_key
from routing_engine import GRAY

log = logging.getLogger(__name__)
# The agent empties the log when it passes this size (the engines append with O_APPEND).
MAX_LOG_BYTES = 64 * 1024 * 1024


def count_line(metrics: Metrics, generation: Generation, line: bytes) -> None:
    try:
        entry = json.loads(line)
        service = entry.get("service") or _service_of(entry.get("path"))
        status = int(entry["status"])
        # Envoy logs microseconds; nginx's $request_time is seconds to the millisecond.
        latency_ms = float(entry["us"]) / 1000 if "us" in entry else float(entry["seconds"]) * 1000
    except (ValueError, KeyError, TypeError):
        return
    if not service or service == "-":
        return
    upstream = str(entry.get("upstream") or "").replace(" : ", ", ").split(", ")[-1]
    flag = str(entry.get("flag") or "")
    # Envoy logs "-" for a header it did not see, nginx an empty variable.
    lane = str(entry.get("lane") or "").strip("-") or None
    key = route_key(flag, lane)
    version = generation.version_of(service, upstream) or generation.asked_version(service, key)
    if version is not None:
        metrics.record(service, version, status >= 500, latency_ms, key if flag == GRAY else None)


def _service_of(path) -> str | None:
    """The service a request went to: the first segment of its path (Envoy's lines)."""
    if not isinstance(path, str) or not path.startswith("/"):
        return None
    return path[1:].split("/", 1)[0].split("?", 1)[0] or None


class LogTail:
    """A JSON log an engine appends to (O_APPEND), read from where it was left: its whole
    lines go to `consume`. The agent owns the file: it empties it past MAX_LOG_BYTES, and
    starts over when the file was emptied or replaced (rotated, or the engine restarted
    over a new one). Reading never holds up the engine, which only appends."""

    def __init__(self, path: Path, consume: Callable[[list[bytes]], None]):
        self.path = path
        self.consume = consume
        self.offset = 0
        self.partial = b""
        self.inode = 0

    def read(self) -> None:
        try:
            stat = self.path.stat()
        except FileNotFoundError:
            return
        if stat.st_size < self.offset or stat.st_ino != self.inode:  # emptied or replaced
            self.offset, self.partial, self.inode = 0, b"", stat.st_ino
        with open(self.path, "rb") as file:
            file.seek(self.offset)
            data = file.read(MAX_LOG_BYTES)
        self.offset += len(data)
        lines = (self.partial + data).split(b"\n")
        self.partial = lines.pop()
        if lines:
            self.consume(lines)
        if self.offset > MAX_LOG_BYTES and not self.partial:
            with open(self.path, "r+b") as file:
                file.truncate(0)
            self.offset = 0

    async def run(self, interval: float) -> None:
        while True:
            await asyncio.sleep(interval)
            try:
                self.read()
            except OSError as exc:
                log.warning("Cannot read the log %s: %s", self.path, exc)


def access_log_tail(
    path: Path, metrics: Metrics, generation: Callable[[], Generation | None]
) -> LogTail:
    """The access log counted into `metrics`, by the generation in force."""

    def consume(lines: list[bytes]) -> None:
        current = generation()
        if current is not None:
            for line in lines:
                count_line(metrics, current, line)

    return LogTail(path, consume)
