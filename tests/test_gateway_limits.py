"""The limits of a request head (dataplane/gateway/limits.py), the same for the Python gateway
and for Envoy and nginx as the agent renders them: a request line over 8 KiB is refused with
414, a header over 8 KiB, headers over 64 KiB in all or more than 100 of them with 431, as
the head arrives (not once it ends), nothing of it reaches an instance, and the connection is
closed. Slow uploads hold bounded memory, and it goes back when their clients leave."""

import asyncio
import contextlib
import json
import socket
import threading
import time
from http.client import HTTPResponse
from pathlib import Path

import httpx
import pytest

from dataplane.gateway.limits import (
    HEADER_COUNT_LIMIT,
    HEADER_LIMIT,
    HEADERS_LIMIT,
    REQUEST_LINE_LIMIT,
)
from testing.agent_lab import engines, start_agent
from testing.gateway_lab import COUNTING, SHUTTING_DOWN, SLOW_READER
from tests.test_gateway_routing import SEED_RULES

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]
MiB = 1 << 20


@pytest.fixture(params=[pytest.param("gateway"), *engines()])
def proxy(request, lab, two_versions):
    """(kind, process): the Python gateway, or the agent running Envoy or nginx, in front of
    user-app's two instances."""
    kind = request.param
    front = lab.start_gateway() if kind == "gateway" else start_agent(lab, kind)
    return kind, front


def request_line(length: int) -> bytes:
    """A GET request line of `length` bytes (its CRLF not counted)."""
    start, end = b"GET /user-app/", b" HTTP/1.1"
    return start + b"a" * (length - len(start) - len(end)) + end + b"\r\n"


def header(name: str, size: int) -> bytes:
    """A header line whose name and value are `size` bytes together."""
    return b"%b: %b\r\n" % (name.encode(), b"v" * (size - len(name)))


def head(*headers: bytes, line: bytes = b"GET /user-app/hello HTTP/1.1\r\n") -> bytes:
    """A request head: `line`, Host (6 bytes, one header) and `headers`."""
    return line + b"Host: gw\r\n" + b"".join(headers) + b"\r\n"


def fill(count: int, size: int) -> list[bytes]:
    return [header(f"X-Fill-{n:03d}", size) for n in range(count)]


def exchange(port: int, data: bytes) -> tuple[int, bool]:
    """Send `data` on a new connection and read the answer: (status, whether the proxy then
    closed the connection, asked of refusals only). The sending runs in a thread, so an
    answer that comes before all of `data` went out is read as it comes."""
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.settimeout(10)
        sender = threading.Thread(target=_send_quietly, args=(sock, data))
        sender.start()
        try:
            answer = HTTPResponse(sock)
            answer.begin()
            answer.read()
            closed = answer.status >= 400 and _closed(sock)
        finally:
            with contextlib.suppress(OSError):  # ends a sendall the proxy stopped reading
                sock.shutdown(socket.SHUT_RDWR)
            sender.join(10)
    return answer.status, closed


def _closed(sock: socket.socket) -> bool:
    """Whether the proxy closes the connection within 3 s (Envoy waits up to 1 s for the
    client to close first: its delayed close)."""
    sock.settimeout(3)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def _send_quietly(sock: socket.socket, data: bytes) -> None:
    # An error here is the proxy closing the connection on the rest: what is asked of it.
    with contextlib.suppress(OSError):
        sock.sendall(data)


# Heads of ordinary size; heads at the limits that every proxy takes (nginx keeps a head in
# 8 KiB buffers, so at most 64 KiB of it, and a line that does not fit in what is left of one
# buffer starts the next: well-packed lines are taken up to the limit, docs/agent.md);
# heads over each limit.
WITHIN = {
    "ordinary": head(header("Accept", 40), header("X-User-No", 20)),
    "8,000-byte request line": head(line=request_line(8000)),
    "8,000-byte header": head(header("X-Big", 8000)),
    "100 headers, 56,000 bytes": head(header("X-Big", 8000), *fill(98, 490)),
}
OVER = {
    "9,000-byte request line": head(line=request_line(9000)),
    "9,000-byte header": head(header("X-Big", 9000)),
    "1 MB header": head(header("X-Big", 1_000_000)),
    "101 headers": head(*fill(100, 20)),
    "10,000 headers": head(*fill(10_000, 20)),
    "9 headers of 8,000 bytes: 72,006": head(*fill(9, 8000)),
}
REFUSED = {
    "9,000-byte request line": 414,
    "9,000-byte header": 431,
    "1 MB header": 431,
    "101 headers": 431,
    "10,000 headers": 431,
    "9 headers of 8,000 bytes: 72,006": 431,
}
# What each engine lets through (docs/agent.md): nginx has no limit on the number of
# headers, Envoy none on one header's size.
PASSES = {"nginx": {"101 headers"}, "envoy": {"9,000-byte header"}}
# Envoy measures the request line in its Lua filter, once it has read the whole head (at
# most 64 KiB): it answers, and the connection can go on.
ENVOY_KEEPS_OPEN = {"9,000-byte request line"}


def test_heads_within_the_limits_pass_and_heads_over_them_are_refused(proxy, two_versions):
    kind, front = proxy
    v1, v2 = two_versions
    for name, data in WITHIN.items():
        assert exchange(front.port, data)[0] == 200, name
    reached = len(v1.received) + len(v2.received)
    assert reached == len(WITHIN)
    outcomes = {name: exchange(front.port, data) for name, data in OVER.items()}
    expected = {
        name: (200, False)
        if name in PASSES.get(kind, ())
        else (status, not (kind == "envoy" and name in ENVOY_KEEPS_OPEN))
        for name, status in REFUSED.items()
    }
    assert outcomes == expected
    passed = sum(1 for name in OVER if expected[name][0] == 200)
    assert len(v1.received) + len(v2.received) == reached + passed, "a refused head went on"


def test_a_body_over_a_mebibyte_reaches_the_instance_through_every_proxy(proxy, two_versions):
    _, front = proxy
    body = b"b" * (MiB + MiB // 2)  # over nginx's own default limit
    answer = httpx.post(f"{front.url}/user-app/hello", content=body, timeout=30)
    assert answer.status_code == 200, answer.text[:200]
    assert [len(r.body) for v in two_versions for r in v.received] == [len(body)]


def test_the_python_gateway_refuses_one_byte_over_each_limit(lab, two_versions):
    gateway = lab.start_gateway()
    host = len("Host") + len("gw")
    at_limit = {
        "request line": head(line=request_line(REQUEST_LINE_LIMIT)),
        "header": head(header("X-Big", HEADER_LIMIT)),
        "count": head(*fill(HEADER_COUNT_LIMIT - 1, 20)),
        "all headers": head(
            *fill(7, HEADER_LIMIT), header("X-Rest", HEADERS_LIMIT - 7 * HEADER_LIMIT - host)
        ),
    }
    one_over = {
        "request line": head(line=request_line(REQUEST_LINE_LIMIT + 1)),
        "header": head(header("X-Big", HEADER_LIMIT + 1)),
        "count": head(*fill(HEADER_COUNT_LIMIT, 20)),
        "all headers": head(
            *fill(7, HEADER_LIMIT), header("X-Rest", HEADERS_LIMIT - 7 * HEADER_LIMIT - host + 1)
        ),
    }
    assert {name: exchange(gateway.port, data) for name, data in at_limit.items()} == {
        name: (200, False) for name in at_limit
    }
    assert {name: exchange(gateway.port, data) for name, data in one_over.items()} == {
        "request line": (414, True),
        "header": (431, True),
        "count": (431, True),
        "all headers": (431, True),
    }
    answer = httpx.get(gateway.url + "/user-app/hello", headers={"X-Big": "v" * HEADER_LIMIT})
    assert answer.status_code == 431
    assert answer.headers["content-type"] == "application/json"
    assert "8 KiB" in answer.json()["detail"]


def test_an_endless_header_is_refused_at_the_limit_not_at_its_end(proxy):
    """20 MB of one header, 64 KiB every 5 ms (4 s in all if nobody stops it): the answer
    comes once the limit is crossed, and the proxy takes no more than a little of the rest
    (nginx reads and drops it all, to the end of its lingering close: docs/agent.md)."""
    kind, front = proxy
    total = 20_000_000
    sent = 0
    with socket.create_connection(("127.0.0.1", front.port)) as sock:
        sock.settimeout(10)

        def stream() -> None:
            nonlocal sent
            piece = b"a" * 65536
            try:
                sock.sendall(b"GET /user-app/hello HTTP/1.1\r\nHost: gw\r\nX-Endless: ")
                while sent < total:
                    sock.sendall(piece)
                    sent += len(piece)
                    time.sleep(0.005)
            except OSError:
                pass

        sender = threading.Thread(target=stream)
        sender.start()
        try:
            answer = HTTPResponse(sock)
            answer.begin()
            sent_when_answered = sent
        finally:
            sender.join(30)
    print(f"answered {answer.status} after {sent_when_answered:,} bytes; {sent:,} sent in all")
    assert answer.status == 431
    assert sent_when_answered < MiB
    if kind != "nginx":
        assert sent < total, "the connection was closed before the end of the stream"


# 200 uploads of 1 MiB at once, each as a slow link delivers it: 1 KiB at a time, 5 ms apart
# (5 s each).
UPLOADS = 200
UPLOAD_SIZE = MiB
PIECE = 1024
PAUSE = 0.005


def test_the_memory_200_slow_uploads_took_goes_back_when_they_end(lab):
    lab.instance("user-app", "V1", COUNTING)
    lab.sync()
    lab.policy(**SEED_RULES)
    gateway = lab.start_gateway()
    pid = gateway.popen.pid
    for _ in range(3):  # a gateway that has served before
        assert httpx.post(gateway.url + "/user-app/up", content=b"x" * 4096).status_code == 200
    before = _status_mib(pid, "VmRSS")
    answers = asyncio.run(_slow_uploads(gateway.port))
    ended = time.monotonic()
    peak = _status_mib(pid, "VmHWM")
    bound = before + max(before * 0.1, 10)
    after = _status_mib(pid, "VmRSS")
    while after > bound and time.monotonic() - ended < 30:
        time.sleep(0.5)
        after = _status_mib(pid, "VmRSS")
    waited = time.monotonic() - ended
    print(
        f"gateway RSS: before {before:.1f} MiB, peak {peak:.1f} MiB, "
        f"after {after:.1f} MiB ({waited:.1f} s after the last upload ended)"
    )
    assert answers == [(200, UPLOAD_SIZE)] * UPLOADS
    assert after <= bound


async def _slow_uploads(port: int) -> list[tuple[int, int]]:
    """(status, bytes the instance received) of each upload. Every upload has begun before
    any goes on past its first piece, so all 200 are in flight together."""
    connected = 0
    everyone = asyncio.Event()
    piece = b"u" * PIECE

    async def upload() -> tuple[int, int]:
        nonlocal connected
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(
            b"POST /user-app/upload HTTP/1.1\r\nHost: gw\r\nContent-Length: %d\r\n\r\n%b"
            % (UPLOAD_SIZE, piece)
        )
        connected += 1
        if connected == UPLOADS:
            everyone.set()
        await everyone.wait()
        for _ in range(UPLOAD_SIZE // PIECE - 1):
            await asyncio.sleep(PAUSE)
            writer.write(piece)
            await writer.drain()
        status_line, _, rest = (await reader.readuntil(b"\r\n\r\n")).partition(b"\r\n")
        length = next(
            int(line.split(b":")[1])
            for line in rest.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        )
        body = json.loads(await reader.readexactly(length))
        writer.close()
        await writer.wait_closed()
        return int(status_line.split()[1]), body["received"]

    return await asyncio.gather(*(upload() for _ in range(UPLOADS)))


def _status_mib(pid: int, field: str) -> float:
    """A memory figure of /proc/<pid>/status (VmRSS: resident now, VmHWM: the most ever)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise LookupError(field)


def test_an_upload_faster_than_its_instance_reads_is_held_back_not_buffered(lab):
    """Flow control: 64 MiB sent as fast as the client can, to an instance that reads once
    every 10 ms. The gateway stops reading from the client while the instance's connection is
    full, so the body waits in the client and the sockets, not in the gateway."""
    lab.instance("user-app", "V1", SLOW_READER)
    lab.sync()
    lab.policy(**SEED_RULES)
    gateway = lab.start_gateway()
    pid = gateway.popen.pid
    before = _status_mib(pid, "VmRSS")
    size = 64 * MiB

    def body():
        piece = b"b" * MiB
        for _ in range(size // MiB):
            yield piece

    answer = httpx.post(
        gateway.url + "/user-app/upload",
        content=body(),
        headers={"Content-Length": str(size)},
        timeout=60,
    )
    grown = _status_mib(pid, "VmHWM") - before
    print(f"gateway RSS: {before:.1f} MiB before, at most {grown:.1f} MiB more for 64 MiB")
    assert answer.json()["received"] == size
    assert grown < 8


def test_a_body_that_came_in_pieces_is_sent_whole_to_the_next_instance(lab):
    """A body kept for a second sending in pieces (replay.py) goes whole to the instance
    tried after one that answered the shutting-down marker."""
    draining = lab.instance("user-app", "V1", SHUTTING_DOWN)
    lab.instance("user-app", "V1")
    lab.sync()
    lab.policy(**SEED_RULES)
    gateway = lab.start_gateway()
    body = bytes(range(256)) * 1200  # 300 KiB

    def pieces():
        for start in range(0, len(body), 10_000):
            time.sleep(0.002)  # each piece reaches the gateway on its own
            yield body[start : start + 10_000]

    for _ in range(2):  # round robin: one of them is sent to the draining instance first
        answer = httpx.post(
            gateway.url + "/user-app/orders",
            content=pieces(),
            headers={"Content-Length": str(len(body))},
            timeout=10,
        )
        assert answer.status_code == 200
        assert answer.json()["body"].encode("latin-1") == body
    assert len(draining.received) == 1
