"""Getting the routing configuration: the long poll of docs/gateway-protocol.md, an ack
per generation, and fail static.

* An applied generation is acked by the next poll (`applied=N`), sent right after it: one
  HTTP exchange per generation fewer than a poll, an ack and a poll. An ack that says more
  than the generation goes to the ack endpoint instead: the first one of the process (it
  names the engine, `ack_fields`), one listing skipped records, and an error ack.

* A new document is compiled (routing.RoutingTable) off the event loop. Records it cannot
  use are left out and the rest is applied: the ack lists them (`skipped`). A document
  unreadable as a whole is refused: the gateway acks its generation with the error, keeps
  routing by the table in force, and polls for a newer generation.
* An applied one replaces the table, is written to the cache file (atomically: a temporary
  file renamed over it) and acked.
* While the dashboard cannot be reached the gateway keeps its table, and it starts from
  the cache file when the dashboard is down at its own start. Given several dashboard
  URLs, its client (dataplane/dashboards.py) sends a poll or ack that one cannot answer
  to the next, so a replica going away costs a re-sent poll, not the generations after.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import os
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import httpx

from dataplane.gateway.routing import ConfigError, RoutingTable
from routing_engine.records import Skipped

log = logging.getLogger(__name__)
NAME_HEADER = "X-Graylane-Gateway"
CONFIG_PATH = "/api/v1/gateway-config/"
RETRY_SECONDS = (0.2, 0.5, 1.0, 2.0)
# Skipped records an ack lists (the dashboard takes no more); the log has them all.
MAX_SKIPPED_IN_ACK = 50


def write_atomically(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


class ConfigClient:
    def __init__(
        self,
        *,
        client: httpx.AsyncClient,
        cache_file: Path,
        install: Callable[[Any], Any],
        current: Callable[[], Any],
        name: str | None,
        poll_wait: float,
        prod_fallback: bool,
        compile: Callable[[bytes], Any] | None = None,
        ack_fields: dict[str, str] | None = None,
    ):
        """`compile` (run off the event loop) turns a document into what `install` puts
        in force, both raising ConfigError for one to refuse; `install` may be a coroutine
        function (the agent's: it returns once the engine runs the new configuration).
        Default: the Python gateway's RoutingTable. What `current` returns (the one in
        force) and `compile` returns must have `generation`, `revision` and `skipped`
        (routing_engine.records.Skipped: what it left out). `ack_fields`
        go with every ack (the agent's `engine` and `engine_version`)."""
        self.client = client
        self.cache_file = cache_file
        self.install = install
        self.current = current
        self.name = name
        self.poll_wait = poll_wait
        self.prod_fallback = prod_fallback
        self._compile = compile
        self.ack_fields = ack_fields or {}
        self.known: int | None = None  # the generation polled for: running or refused
        self.acked: int | None = None  # the generation the dashboard recorded as running
        # Whether an ack with `ack_fields` was taken: until then none is folded into a poll.
        self.fields_told = not self.ack_fields
        self.ready = asyncio.Event()  # set once a name is known (for acks and metrics)
        if name:
            self.ready.set()

    async def compile(self, body: bytes) -> Any:
        loop = asyncio.get_running_loop()
        if self._compile is not None:
            return await loop.run_in_executor(None, self._compile, body)
        return await loop.run_in_executor(
            None, RoutingTable.from_document, body, self.current(), self.prod_fallback
        )

    async def _install(self, table: Any) -> None:
        installed = self.install(table)
        if inspect.isawaitable(installed):
            await installed

    async def load_cache(self) -> bool:
        """Start from the cached document, if there is a good one."""
        try:
            body = self.cache_file.read_bytes()
        except FileNotFoundError:
            return False
        except OSError as exc:
            log.warning("Cannot read the cached configuration %s: %s", self.cache_file, exc)
            return False
        try:
            table = await self.compile(body)
            await self._install(table)
        except ConfigError as exc:
            log.warning("The cached configuration %s is unusable: %s", self.cache_file, exc)
            return False
        self.known = table.generation
        log.info("Routing by the cached configuration, generation %d.", table.generation)
        return True

    async def run(self) -> None:
        failures = 0
        while True:
            try:
                await self.poll_once()
                failures = 0
            except (httpx.HTTPError, OSError) as exc:
                if failures == 0:
                    table = self.current()
                    running = f"generation {table.generation}" if table else "no configuration"
                    log.warning(
                        "The dashboard cannot be reached (%s); routing by %s.", exc, running
                    )
                await asyncio.sleep(RETRY_SECONDS[min(failures, len(RETRY_SECONDS) - 1)])
                failures += 1

    async def poll_once(self) -> None:
        params: dict[str, str | float] = {"wait": self.poll_wait}
        if self.known is not None:
            params["known"] = self.known
        running = self.current()
        applied = None
        if running and self.acked != running.generation and self._foldable(running):
            applied = params["applied"] = running.generation
        response = await self.client.get(
            CONFIG_PATH, params=params, timeout=httpx.Timeout(5.0, read=self.poll_wait + 10)
        )
        self._learn_name(response)
        if applied is not None and response.status_code in (200, 304):
            self.acked = applied  # recorded before the poll was answered
        if response.status_code == 304:
            running = self.current()
            if running and self.acked != running.generation:
                # e.g. its ack failed; say what we run (not `known`: it may be one refused)
                await self.ack(running.generation, skipped=running.skipped)
            return
        if response.status_code != 200:
            log.warning(
                "The dashboard answered the poll with %d: %s",
                response.status_code,
                response.text[:200],
            )
            await asyncio.sleep(RETRY_SECONDS[-1])
            return
        await self.apply(response.content)

    async def _refuse(self, body: bytes, why: str) -> None:
        generation = _generation_of(body)
        running = self.current()
        log.error(
            "Refused generation %s: %s; still routing by %s.",
            generation,
            why,
            f"generation {running.generation}" if running else "no configuration",
        )
        if generation is not None:
            self.known = generation
            await self.ack(generation, error=why)
        else:
            await asyncio.sleep(RETRY_SECONDS[-1])

    def _learn_name(self, response: httpx.Response) -> None:
        if self.name is None and response.headers.get(NAME_HEADER):
            self.name = response.headers[NAME_HEADER]
            log.info("This gateway is %r (from the dashboard).", self.name)
            self.ready.set()

    async def apply(self, body: bytes) -> None:
        try:
            table = await self.compile(body)
        except ConfigError as exc:
            await self._refuse(body, str(exc))
            return
        except Exception as exc:
            # A fault of this process in compiling, not of the document (say a TypeError of
            # the compiled request path, dataplane/gateway/compiled.py): refused like an
            # unreadable one, so the dashboard hears of it and the gateway goes on routing and
            # polling; the exception would otherwise end the poll loop, and no later
            # generation would come. (What `install` raises besides ConfigError still ends
            # it: the agent's engine exited, and the agent exits saying why.)
            log.exception("Could not compile generation %s.", _generation_of(body))
            why = f"the gateway failed compiling it: {type(exc).__name__}: {exc}"
            await self._refuse(body, why)
            return
        try:
            await self._install(table)
        except ConfigError as exc:
            await self._refuse(body, str(exc))
            return
        self.known = table.generation
        log.info("Routing by generation %d (revision %d).", table.generation, table.revision)
        for entry in table.skipped:
            log.warning(
                "Generation %d: skipped %s: %s", table.generation, entry.record, entry.reason
            )
        try:
            await asyncio.get_running_loop().run_in_executor(
                None, write_atomically, self.cache_file, body
            )
        except OSError as exc:
            log.warning("Cannot write the cache file %s: %s", self.cache_file, exc)
        if not self._foldable(table):
            await self.ack(table.generation, skipped=table.skipped)
        # else the next poll, sent at once, acks it

    def _foldable(self, table: Any) -> bool:
        """Whether the ack of this applied table can be folded into a poll."""
        return self.fields_told and not table.skipped

    async def ack(
        self, generation: int, error: str | None = None, skipped: Sequence[Skipped] = ()
    ) -> None:
        if self.name is None:
            log.warning(
                "Not acking generation %d: this gateway's name is unknown (give --name).",
                generation,
            )
            return
        body: dict = {**self.ack_fields, "generation": generation}
        if error is not None:
            body["error"] = error
        if skipped:
            body["skipped"] = [entry.as_json() for entry in skipped[:MAX_SKIPPED_IN_ACK]]
            if len(skipped) > MAX_SKIPPED_IN_ACK:
                more = len(skipped) - MAX_SKIPPED_IN_ACK + 1
                body["skipped"][-1] = {"record": f"{more} more", "reason": "see the log"}
        response = await self.client.post(f"/api/v1/gateways/{self.name}/ack/", json=body)
        if response.status_code != 200:
            log.warning(
                "The ack of generation %d got %d: %s",
                generation,
                response.status_code,
                response.text[:200],
            )
        else:
            self.fields_told = True
            if error is None:
                self.acked = generation


def _generation_of(body: bytes) -> int | None:
    try:
        generation = json.loads(body).get("generation")
    except (ValueError, AttributeError, RecursionError):
        return None
    valid = isinstance(generation, int) and not isinstance(generation, bool) and generation >= 0
    return generation if valid else None
