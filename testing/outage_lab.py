"""Writes through a real dashboard while its database or its Redis goes away
(tests/test_outages.py), and what each of them left in the database afterwards.

The test process only speaks HTTP to the server. What it needs in the database first
(`prepare`) and what it reads from it afterwards (`count`) run as `python -m
testing.outage_lab prepare|count` on the same DATABASE_URL as the server, so the test needs
no database of the suite's and the machine's PostgreSQL is never involved.

Every write leaves a mark of its own (a comment, a name, a port, a version), so `count`
can say of each one how many times it was committed: once for a 2xx, never for a 503.
"""

import itertools
import json
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime

import httpx

from testing.processes import BASE_DIR

GATEWAY = "outage-gw"
DRAIN_SERVICE = "drain-app"
DRAIN_INSTANCES = 400
DRAIN_PORT = 7000


def run(env: dict[str, str], command: str, payload=None):
    """`python -m testing.outage_lab <command>` on env's database; its JSON answer."""
    done = subprocess.run(
        [sys.executable, "-m", "testing.outage_lab", command],
        cwd=BASE_DIR,
        env=env,
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        timeout=120,
    )
    if done.returncode:
        raise RuntimeError(f"outage_lab {command} failed:\n{done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


@dataclass
class Write:
    kind: str
    key: str | int
    method: str
    path: str
    body: dict | None = None
    params: dict | None = None
    token: str = "admin"
    status: int | None = None  # None: no answer (the connection failed)
    answer: dict | str = ""
    retry_after: str | None = None
    sent_at: float = 0.0  # time.monotonic()
    answered_at: float = 0.0

    def expected(self) -> int:
        """How many times this write should be in the database: once if it succeeded and
        had something to change (a poll changes nothing, nor does a rollback to the live
        content)."""
        succeeded = self.status is not None and 200 <= self.status < 300
        if not succeeded or self.kind == "poll" or "already live" in str(self.answer):
            return 0
        return 1


@dataclass
class Stream:
    """Writers, one thread each, writing in turn until stopped."""

    url: str
    tokens: dict[str, str]
    lab: dict
    writes: list[Write] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _counter: itertools.count = field(default_factory=lambda: itertools.count(1))

    def __post_init__(self):
        self.threads = [
            threading.Thread(target=self._loop, args=(writer,), daemon=True)
            for writer in (
                self._policy,
                self._versions,
                self._rollback,
                self._gateways_and_registries,
                self._offline_online,
                self._lifecycle,
                self._releases,
                self._metrics,
                self._embedded_registry,
                self._gateway_calls,
            )
        ]

    def start(self) -> "Stream":
        for thread in self.threads:
            thread.start()
        return self

    def finish(self) -> list[Write]:
        self.stop.set()
        for thread in self.threads:
            thread.join(60)
        return self.writes

    def made(self) -> int:
        with self._lock:
            return len(self.writes)

    def _loop(self, writer) -> None:
        with httpx.Client(base_url=self.url, timeout=30) as client:
            steps = writer()
            write = next(steps)
            while not self.stop.is_set():
                self._send(client, write)
                try:
                    write = steps.send(write)
                except StopIteration:
                    return

    def _send(self, client: httpx.Client, write: Write) -> None:
        write.sent_at = time.monotonic()
        try:
            response = client.request(
                write.method,
                write.path,
                json=write.body,
                params=write.params,
                headers={"Authorization": f"Token {self.tokens[write.token]}"},
            )
        except httpx.HTTPError as exc:
            write.answer = repr(exc)
        else:
            write.status = response.status_code
            write.retry_after = response.headers.get("Retry-After")
            try:
                write.answer = response.json()
            except ValueError:
                write.answer = response.text[:500]
        write.answered_at = time.monotonic()
        with self._lock:
            self.writes.append(write)

    def _n(self) -> int:
        return next(self._counter)

    # Each writer yields its writes and is sent back each one once answered.

    def _policy(self):
        while True:
            tag = f"policy-{self._n()}"
            body = {"header": {"value": tag}, "comment": tag}
            yield Write("policy", tag, "PATCH", "/api/v1/policy/", body)

    def _versions(self):
        while True:
            tag = f"P{self._n()}"
            body = {"prod_version": tag, "gray_version": "V2"}
            yield Write("versions", tag, "PATCH", "/api/v1/services/cart-app/", body)

    def _rollback(self):
        for number in itertools.cycle(self.lab["rollback_targets"]):
            tag = f"rollback-{self._n()}"
            path = f"/api/v1/revisions/{number}/rollback/"
            yield Write("rollback", tag, "POST", path, {"comment": tag})

    def _gateways_and_registries(self):
        while True:
            n = self._n()
            yield Write("gateway", f"gw-{n}", "POST", "/api/v1/gateways/", {"name": f"gw-{n}"})
            body = {"name": f"reg-{n}", "kind": "eureka", "base_url": "http://127.0.0.1:9/eureka"}
            yield Write("registry", f"reg-{n}", "POST", "/api/v1/registries/", body)

    def _offline_online(self):
        for instance_id, port in self.lab["drain_instances"]:
            yield Write("offline", port, "POST", f"/api/v1/instances/{instance_id}/offline/")
            yield Write("online", port, "POST", f"/api/v1/instances/{instance_id}/online/")

    def _lifecycle(self):
        while True:
            port = 20000 + self._n()
            body = {"service": "user-app", "host": "127.0.0.1", "port": port,
                    "event": "starting", "at": datetime.now(UTC).isoformat()}  # fmt: skip
            yield Write("lifecycle", port, "POST", "/api/v1/lifecycle/", body)

    def _releases(self):
        """Create, start and abort, one release after the other; a client retries what
        failed (so a write committed although it failed shows as a 409 on the retry)."""
        while True:
            deadline = 3600 + self._n()
            body = {"service": "user-app", "to_version": "V2", "steps": [{"percent": 50}],
                    "analysis": {"interval_s": 60, "deadline_s": deadline}}  # fmt: skip
            created = yield Write("release", deadline, "POST", "/api/v1/releases/", body)
            if created.status != 201:
                continue
            release = created.answer["id"]
            yield Write("start", release, "POST", f"/api/v1/releases/{release}/start/")
            while True:
                path = f"/api/v1/releases/{release}/abort/"
                aborted = yield Write("abort", release, "POST", path)
                if aborted.status not in (503, None):
                    break

    def _metrics(self):
        while True:
            tag = f"M{self._n()}"
            sample = {"service": "user-app", "version": tag, "ts": int(time.time()) - 1,
                      "window_s": 1, "total": 1, "errors": 0, "latency_ms_p95": 1.0}  # fmt: skip
            body = {"gateway": GATEWAY, "samples": [sample]}
            yield Write("metrics", tag, "POST", "/api/v1/metrics/", body, token="gateway")

    def _embedded_registry(self):
        while True:
            port = 30000 + self._n()
            params = {"serviceName": "reg-app", "ip": "127.0.0.1", "port": port,
                      "metadata": json.dumps({"version": "V1"}),
                      "accessToken": self.tokens["admin"]}  # fmt: skip
            yield Write("register", port, "POST", "/nacos/v1/ns/instance", params=params)

    def _gateway_calls(self):
        """The gateway endpoints (served straight from ASGI): a poll, and the ack of what it
        answered."""
        while True:
            poll = yield Write("poll", 0, "GET", "/api/v1/gateway-config/", token="gateway")
            if poll.status == 200:
                number = poll.answer["generation"]
                path = f"/api/v1/gateways/{GATEWAY}/ack/"
                yield Write("ack", number, "POST", path, {"generation": number}, token="gateway")


# -- in the subprocess, on the server's database ---------------------------------------------


def prepare() -> dict:
    from django.contrib.auth.models import Group, User

    from accounts.models import ApiToken
    from gateways.models import Gateway
    from policy.services import update_policy
    from registry_sync.models import Instance, Registry, Service

    admin = User.objects.create_user("outage-admin")
    admin.groups.add(Group.objects.get_or_create(name="admin")[0])
    _, admin_key = ApiToken.objects.issue(admin)
    _, gateway_key, _ = Gateway.objects.create_with_credentials(name=GATEWAY, mode=Gateway.PULL)
    registry = Registry.objects.create(name="outage-embedded", kind=Registry.EMBEDDED)
    for name in ("user-app", "cart-app", DRAIN_SERVICE):
        Service.objects.create(name=name, registry=registry)
    # The releases' to_version: a release is made only to a version instances run.
    Instance.objects.create(
        service=Service.objects.get(name="user-app"),
        instance_id="127.0.0.1#7202",
        host="127.0.0.1",
        port=7202,
        version="V2",
    )
    drain = Service.objects.get(name=DRAIN_SERVICE)
    Instance.objects.bulk_create(
        Instance(
            service=drain,
            instance_id=f"127.0.0.1#{port}",
            host="127.0.0.1",
            port=port,
            version="V1",
        )  # fmt: skip
        for port in range(DRAIN_PORT, DRAIN_PORT + DRAIN_INSTANCES)
    )
    targets = []
    for value in ("before-outage-a", "before-outage-b"):
        policy = {"enabled": True, "routing": True, "header": {"name": "gray", "value": value}}
        result = update_policy(
            policy, partial=True, actor="outage-admin", source="api", expected_revision=None
        )
        targets.append(result.state.revision)
    return {
        "tokens": {"admin": admin_key, "gateway": gateway_key},
        "rollback_targets": targets,
        "drain_instances": list(
            Instance.objects.filter(service=drain).order_by("port").values_list("pk", "port")
        ),
    }


def count(writes: list[dict]) -> list[int]:
    """For each write ({kind, key}), how many times the database holds it."""
    from audit.models import AuditEntry
    from embedded_registry.models import EmbeddedInstance
    from gateways.models import Gateway
    from metrics.models import MinuteRollup
    from policy.models import Revision
    from registry_sync.models import LifecycleEvent, Registry
    from releases.models import Release, ReleaseEvent

    revisions = list(Revision.objects.values("number", "comment", "diff"))
    audit = Counter(AuditEntry.objects.values_list("action", "object"))
    policy_audit = Counter(
        (after or {}).get("header", {}).get("value")
        for after in AuditEntry.objects.filter(action="policy.update").values_list(
            "after", flat=True
        )
    )
    versions_audit = Counter(
        ((after or {}).get("override") or {}).get("prod")
        for after in AuditEntry.objects.filter(action="service.versions").values_list(
            "after", flat=True
        )
    )
    releases = Counter(
        analysis.get("deadline_s")
        for analysis in Release.objects.values_list("analysis", flat=True)
    )
    release_events = Counter(ReleaseEvent.objects.values_list("kind", "release_id"))
    # A start commits with its audit entry; its `started` event waits for the gateways to
    # ack the step (releases/convergence.py), which an outage may hold up.
    starts = Counter(
        int(label.split()[1])
        for label in AuditEntry.objects.filter(action="release.start").values_list(
            "object", flat=True
        )
    )

    def with_audit(rows: int, audits: int) -> int:
        # A write's row without its audit entry (or the other way round) is a broken
        # commit: count it as twice, so that no expectation matches.
        return rows if rows == audits else -1

    answers = []
    for write in writes:
        kind, key = write["kind"], write["key"]
        if kind == "policy":
            rows = sum(1 for r in revisions if r["comment"] == key)
            answers.append(with_audit(rows, policy_audit[key]))
        elif kind == "versions":
            rows = sum(1 for r in revisions if any(d.get("after") == key for d in r["diff"]))
            answers.append(with_audit(rows, versions_audit[key]))
        elif kind == "rollback":
            answers.append(sum(1 for r in revisions if r["comment"] == key))
        elif kind == "gateway":
            rows = Gateway.objects.filter(name=key).count()
            answers.append(with_audit(rows, audit["gateway.create", f"gateway {key}"]))
        elif kind == "registry":
            rows = Registry.objects.filter(name=key).count()
            answers.append(with_audit(rows, audit["registry.create", f"registry {key}"]))
        elif kind in ("offline", "online"):
            label = f"instance {DRAIN_SERVICE} 127.0.0.1:{key}"
            answers.append(audit[f"instance.{kind}", label])
        elif kind == "lifecycle":
            answers.append(LifecycleEvent.objects.filter(port=key).count())
        elif kind == "release":
            answers.append(releases[key])
        elif kind == "start":
            answers.append(starts[key])
        elif kind == "abort":
            answers.append(release_events["aborted", key])
        elif kind == "metrics":
            rollups = MinuteRollup.objects.filter(service="user-app", version=key)
            answers.append(sum(rollups.values_list("total", flat=True)))
        elif kind in ("poll", "ack"):
            acked = Gateway.objects.get(name=GATEWAY).acked_generation
            answers.append(int(kind == "ack" and acked >= key))
        elif kind == "register":
            answers.append(EmbeddedInstance.objects.filter(service="reg-app", port=key).count())
        else:
            raise ValueError(f"unknown write kind {kind!r}")
    return answers


def main() -> None:
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m testing.outage_lab",
        description="The outage tests' database side, on DATABASE_URL: `prepare` makes what "
        "the writes need and prints it as JSON; `count` reads the writes (JSON on stdin: "
        "[[kind, key], ...]) and prints how many times each was committed.",
    )
    parser.add_argument("command", choices=("prepare", "count"))
    command = parser.parse_args().command
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "graylane.settings")
    django.setup()
    if command == "prepare":
        print(json.dumps(prepare()))
    else:
        print(json.dumps(count(json.loads(sys.stdin.read()))))


if __name__ == "__main__":
    main()
