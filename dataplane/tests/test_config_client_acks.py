"""How the config client acks (dataplane/gateway/config_client.py), against a scripted
dashboard: the first ack of the process goes to the ack endpoint (it names the engine),
later ones ride on the next poll (`applied=N`), and an ack that says more than the
generation (skipped records, an error) still goes to the ack endpoint."""

import asyncio
import json
from dataclasses import dataclass

import httpx

from dataplane.gateway.config_client import ConfigClient
from dataplane.gateway.routing import ConfigError
from routing_engine.records import Skipped

ENGINE = {"engine": "python", "engine_version": "3.11.7"}


@dataclass(frozen=True)
class Table:
    generation: int
    revision: int = 1
    skipped: tuple[Skipped, ...] = ()


def compile_document(body: bytes) -> Table:
    document = json.loads(body)
    if document.get("broken"):
        raise ConfigError("gray: unreadable")
    if document.get("fault"):
        raise TypeError("str object expected; got None")
    skipped = tuple(Skipped(record, "bad") for record in document.get("skip", ()))
    return Table(document["generation"], skipped=skipped)


class Dashboard:
    """Answers each poll with the next scripted document (then 304s), and records every
    request as (method, path, query, body)."""

    def __init__(self, documents: list[dict]):
        self.documents = list(documents)
        self.requests: list[tuple[str, str, dict, dict | None]] = []

    def handle(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content) if request.content else None
        query = dict(request.url.params)
        self.requests.append((request.method, request.url.path, query, body))
        if request.method == "POST":
            return httpx.Response(200, json={"name": "gw", "acked_generation": 0})
        if self.documents:
            return httpx.Response(200, json=self.documents.pop(0))
        return httpx.Response(304)

    def acks(self) -> list[tuple[str, object]]:
        """("post", body) and ("poll", applied) in the order they were sent."""
        said: list[tuple[str, object]] = []
        for method, _, query, body in self.requests:
            if method == "POST":
                said.append(("post", body))
            elif "applied" in query:
                said.append(("poll", int(query["applied"])))
        return said


def run_polls(dashboard: Dashboard, polls: int, tmp_path) -> ConfigClient:
    running: list[Table] = []

    async def main() -> ConfigClient:
        transport = httpx.MockTransport(dashboard.handle)
        async with httpx.AsyncClient(transport=transport, base_url="http://dashboard") as client:
            config = ConfigClient(
                client=client,
                cache_file=tmp_path / "cache.json",
                install=running.append,
                current=lambda: running[-1] if running else None,
                name="gw",
                poll_wait=0,
                prod_fallback=False,
                compile=compile_document,
                ack_fields=ENGINE,
            )
            for _ in range(polls):
                await config.poll_once()
            return config

    return asyncio.run(main())


def test_acks_after_the_first_ride_on_the_next_poll(tmp_path):
    dashboard = Dashboard([{"generation": n} for n in (1, 2, 3)])
    config = run_polls(dashboard, 5, tmp_path)
    assert dashboard.acks() == [
        ("post", {**ENGINE, "generation": 1}),  # names the engine
        ("poll", 2),
        ("poll", 3),
    ]
    # Once answered, a poll carries the ack no more.
    assert "applied" not in dashboard.requests[-1][2]
    assert config.acked == 3


def test_skipped_records_and_refusals_are_acked_by_the_ack_endpoint(tmp_path):
    dashboard = Dashboard(
        [
            {"generation": 1},
            {"generation": 2, "skip": ["services.a"]},
            {"generation": 3},
            {"generation": 4, "broken": True},
        ]
    )
    config = run_polls(dashboard, 7, tmp_path)
    assert dashboard.acks() == [
        ("post", {**ENGINE, "generation": 1}),
        (
            "post",
            {**ENGINE, "generation": 2, "skipped": [{"record": "services.a", "reason": "bad"}]},
        ),
        ("poll", 3),
        ("post", {**ENGINE, "generation": 4, "error": "gray: unreadable"}),
    ]
    # The refused generation is never acked as run, by poll or after a 304.
    assert config.acked == 3
    assert config.known == 4


def test_an_ack_whose_poll_went_unanswered_goes_with_the_next_one(tmp_path):
    dashboard = Dashboard([{"generation": 1}, {"generation": 2}])
    handle = dashboard.handle
    failed = []

    def flaky(request: httpx.Request) -> httpx.Response:
        if "applied" in request.url.params and not failed:
            failed.append(request)
            return httpx.Response(503, json={"detail": "database unavailable"})
        return handle(request)

    dashboard.handle = flaky  # type: ignore[method-assign]
    config = run_polls(dashboard, 4, tmp_path)
    assert [int(r.url.params["applied"]) for r in failed] == [2]
    assert dashboard.acks() == [("post", {**ENGINE, "generation": 1}), ("poll", 2)]
    assert config.acked == 2


def test_a_fault_compiling_a_generation_is_acked_as_an_error_and_polling_goes_on(tmp_path):
    """Not the document's fault (an exception other than ConfigError, as the compiled path
    raises on a value of another type than annotated): refused and said, and the next
    generation still applies."""
    dashboard = Dashboard([{"generation": 1}, {"generation": 2, "fault": True}, {"generation": 3}])
    config = run_polls(dashboard, 5, tmp_path)
    error = "the gateway failed compiling it: TypeError: str object expected; got None"
    assert dashboard.acks() == [
        ("post", {**ENGINE, "generation": 1}),
        ("post", {**ENGINE, "generation": 2, "error": error}),
        ("poll", 3),
    ]
    assert config.acked == 3
