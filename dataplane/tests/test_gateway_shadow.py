"""The gateway's shadow copies (dataplane/gateway/shadow.py) against a real instance on
loopback: the share copied follows the percent, copies beyond the bound are dropped rather
than queued, a copy of HEAD ends with its head, and an instance that never answers costs a
comparison of class `error`, not a copy held for ever."""

import asyncio

from dataplane.gateway.shadow import Copy, Mirror, Shadower, chosen, shadow_head
from routing_engine.mirror import mirror_threshold
from routing_engine.records import Instance

HEAD = b"GET /user-app/a HTTP/1.1\r\nhost: gateway\r\n\r\n"


def test_the_share_copied_follows_the_percent_and_only_idempotent_methods():
    mirror = Mirror("V2", mirror_threshold({"percent": 10}), [])
    targets = [b"/user-app/item/%d" % n for n in range(20_000)]
    share = sum(chosen(mirror, b"GET", t, False, b"10.0.0.1") for t in targets) / len(targets)
    assert 0.09 < share < 0.11
    assert not any(chosen(mirror, b"POST", t, False, b"10.0.0.1") for t in targets)
    assert not any(chosen(mirror, b"GET", t, True, b"10.0.0.1") for t in targets)  # a body


async def instance(answer: bytes | None) -> tuple[asyncio.Server, list[bytes]]:
    """A server on loopback recording each request's head; answers `answer` (None: never)."""
    heads: list[bytes] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while head := await reader.readuntil(b"\r\n\r\n"):
            heads.append(head)
            if answer is not None:
                writer.write(answer)

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, heads


def copy_to(server: asyncio.Server, method: bytes = b"GET") -> Copy:
    port = server.sockets[0].getsockname()[1]
    mirror = Mirror("V2", 10_000, [Instance("v2", "127.0.0.1", port, "V2", 1.0)])
    head = HEAD.replace(b"GET", method, 1)
    return Copy("user-app", "V1", "/user-app/a", shadow_head(head, method), mirror)


async def settle(shadower: Shadower, timeout: float = 5.0) -> None:
    for _ in range(int(timeout / 0.01)):
        if not shadower.in_flight:
            return
        await asyncio.sleep(0.01)


def test_copies_over_the_bound_are_dropped_and_a_silent_instance_costs_an_error():
    async def run() -> None:
        server, heads = await instance(None)
        shadower = Shadower(max_in_flight=2, timeout=0.3)
        for _ in range(5):
            shadower.launch(copy_to(server), 200, 1.0)
        assert shadower.in_flight == 2 and shadower.stats.dropped == 3
        await settle(shadower)
        entries, dropped = shadower.stats.flush()
        assert dropped == 3
        [entry] = entries
        assert entry["total"] == 2
        assert entry["classes"] == {"2xx": {"total": 2, "mismatched": 2}}
        assert entry["example"] == {"prod_status": 200, "mirror_status": 0}
        assert len(heads) == 2 and all(b"x-gray-shadow: true\r\n" in h for h in heads)
        await shadower.close()
        server.close()

    asyncio.run(run())


def test_a_copy_of_head_ends_with_its_answer_head_and_a_get_reuses_its_connection():
    answer = b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhello"
    head_answer = b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\n"

    async def run() -> None:
        server, heads = await instance(answer)
        shadower = Shadower(timeout=2)
        for _ in range(3):
            shadower.launch(copy_to(server), 200, 1.0)
            await settle(shadower)
        assert len(shadower._open) == 1  # one connection, kept alive, for the three
        entries, _ = shadower.stats.flush()
        assert entries[0]["total"] == 3 and entries[0]["body_mismatched"] == 3
        await shadower.close()
        server.close()

        server, heads = await instance(head_answer)
        shadower = Shadower(timeout=2)
        shadower.launch(copy_to(server, b"HEAD"), 200, 1.0)
        await settle(shadower)
        [entry], _ = shadower.stats.flush()
        assert b"connection: close\r\n" in heads[0]
        assert entry["classes"] == {"2xx": {"total": 1, "mismatched": 0}}
        assert entry["body_mismatched"] == 0  # both bodies empty
        await shadower.close()
        server.close()

    asyncio.run(run())
