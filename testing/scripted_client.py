"""A registry client SDK driven from a test: a script of ours that holds the SDK runs in its
own process and takes one JSON command per stdin line, answering one JSON line each and one
line per subscription callback (tests/node/nacos_client.js, tests/nacos2/nacos_client.py);
and what the tests of such clients read back from Graylane."""

from __future__ import annotations

import json
import queue
import subprocess
import threading
import time
from collections.abc import Callable

import httpx
import pytest

from testing.processes import BASE_DIR


class ScriptedClient:
    """`call(op, **args)` answers what the SDK did; `events` gets its callbacks."""

    sdk = ""  # named when it does not answer

    def __init__(
        self,
        argv: list[str],
        service: str,
        *,
        ready_timeout: float = 15.0,
        env: dict[str, str] | None = None,
    ) -> None:
        self.service = service
        self.popen = subprocess.Popen(
            argv,
            cwd=BASE_DIR,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        self.answers: queue.Queue[dict] = queue.Queue()
        self.events: queue.Queue[dict] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        assert self._next(self.answers, ready_timeout) == {"ready": True}

    def _read(self) -> None:
        assert self.popen.stdout is not None
        for line in self.popen.stdout:
            message = json.loads(line)
            (self.events if "event" in message else self.answers).put(message)

    def _next(self, messages: queue.Queue, timeout: float = 15.0) -> dict:
        try:
            return messages.get(timeout=timeout)
        except queue.Empty:
            self.popen.kill()
            pytest.fail(f"no answer from {self.sdk}: {self.popen.stderr.read()[-3000:]}")  # type: ignore[union-attr]

    def call(self, op: str, **args: object) -> dict:
        assert self.popen.stdin is not None
        self.popen.stdin.write(json.dumps({"op": op, "service": self.service, **args}) + "\n")
        self.popen.stdin.flush()
        return self._next(self.answers)

    def close(self) -> None:
        if self.popen.poll() is None:
            self.popen.stdin.write('{"op": "close"}\n')  # type: ignore[union-attr]
            self.popen.stdin.flush()  # type: ignore[union-attr]
            try:
                self.popen.wait(10)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(5)


def graylane_instances(viewer: httpx.Client, service: str) -> list[tuple[str, int, str]]:
    """(host, port, state) of the service's instances as Graylane shows them."""
    listed = viewer.get(f"/api/v1/services/{service}/instances/")
    if listed.status_code == 404:  # not synced yet: no such service
        return []
    return sorted((i["host"], i["port"], i["state"]) for i in listed.json()["results"])


def eventually(
    read: Callable[[], object], expected: object, timeout: float = 30.0, every: float = 0.2
) -> None:
    deadline, value = time.monotonic() + timeout, None
    while time.monotonic() < deadline:
        value = read()
        if value == expected:
            return
        time.sleep(every)
    assert value == expected
