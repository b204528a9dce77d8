"""The push client (gateways/push.py) against the HTTP/1.1 answers a gateway may give: each
is read right, and what cannot be read is a delivery error that says why."""

import os
import resource
import socket
import threading
from datetime import UTC, datetime

import pytest

from gateways import push
from gateways.errors import DeliveryError
from gateways.models import Gateway
from gateways.snapshot import Snapshot

SNAPSHOT = Snapshot(7, datetime(2026, 11, 30, tzinfo=UTC), b'{"generation": 7}')


class CannedGateway:
    """A loopback server answering every request on a connection with `answers` in turn,
    then (if `close_after`) closing it. Counts connections and requests."""

    def __init__(self, answers: list[bytes], close_after: bool = False):
        self.answers, self.close_after = answers, close_after
        self.connections = self.requests = 0
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}/graylane"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._serve, args=(connection,), daemon=True).start()

    def _serve(self, connection: socket.socket) -> None:
        with connection:
            for answer in self.answers:
                if not self._read_request(connection):
                    return
                self.requests += 1
                connection.sendall(answer)
            if self.close_after:
                connection.shutdown(socket.SHUT_RDWR)
            else:
                while connection.recv(65536):
                    pass

    @staticmethod
    def _read_request(connection: socket.socket) -> bool:
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = connection.recv(65536)
            if not chunk:
                return False
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
        while len(body) < length:
            body += connection.recv(65536)
        return True

    def close(self) -> None:
        self.listener.close()


@pytest.fixture
def deliver():
    """Pushes SNAPSHOT to a gateway at `url` on this thread's push loop."""
    servers = []

    def run(server: CannedGateway) -> int:
        servers.append(server)
        gateway = Gateway(name="edge", mode=Gateway.PUSH, endpoint=server.url, push_secret="s")
        return push.event_loop().run_until_complete(push.push(gateway, SNAPSHOT))

    yield run
    for server in servers:
        server.close()


OK = (
    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 17\r\n\r\n"
    b'{"generation": 7}'
)


def test_a_kept_alive_connection_serves_the_next_push(deliver):
    gateway = CannedGateway([OK, OK])
    assert deliver(gateway) == 7
    assert deliver(gateway) == 7
    assert (gateway.connections, gateway.requests) == (1, 2)


def test_a_chunked_answer_is_read(deliver):
    chunked = (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        b'5\r\n{"gen\r\n0c\r\neration": 7}\r\n0\r\n\r\n'
    )
    assert deliver(CannedGateway([chunked])) == 7


def test_an_answer_that_ends_with_the_connection_is_read_and_not_reused(deliver):
    until_closed = b'HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n{"generation": 7}'
    gateway = CannedGateway([until_closed], close_after=True)
    assert deliver(gateway) == 7
    gateway.answers = [OK]
    assert deliver(gateway) == 7
    assert gateway.connections == 2


def test_connection_close_is_honoured(deliver):
    closing = OK.replace(b"Content-Length", b"Connection: close\r\nContent-Length")
    gateway = CannedGateway([closing], close_after=True)
    assert deliver(gateway) == 7
    assert deliver(gateway) == 7
    assert gateway.connections == 2


def test_a_gateway_that_hangs_up_unanswered_is_a_delivery_error(deliver):
    with pytest.raises(DeliveryError, match="closed the connection unanswered"):
        deliver(CannedGateway([], close_after=True))


def test_an_answer_that_is_not_http_is_a_delivery_error(deliver):
    with pytest.raises(DeliveryError, match="unreadable HTTP answer"):
        deliver(CannedGateway([b"SSH-2.0-OpenSSH_9.2\r\n\r\n"]))


def test_an_error_status_is_a_delivery_error_with_the_answer(deliver):
    refused = b"HTTP/1.1 503 Busy\r\nContent-Length: 9\r\n\r\nreloading"
    with pytest.raises(DeliveryError, match="HTTP 503: reloading"):
        deliver(CannedGateway([refused]))


def test_a_gateway_that_never_answers_times_out(deliver, settings):
    settings.GATEWAY_PUSH_TIMEOUT = 0.3
    with pytest.raises(DeliveryError, match="no answer within 0.3 s"):
        deliver(CannedGateway([b""]))


@pytest.fixture
def descriptors_from_1024():
    """Every descriptor below 1024 taken (the soft limit raised within the hard one), so the
    next socket's is 1024 or above."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = 1024 + 256
    if hard != resource.RLIM_INFINITY and hard < wanted:
        pytest.skip(f"the hard limit of open files is {hard}")
    if soft != resource.RLIM_INFINITY and soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
    opened = [os.open(os.devnull, os.O_RDONLY)]
    try:
        while opened[-1] < 1023:
            opened.append(os.open(os.devnull, os.O_RDONLY))
        yield
    finally:
        for descriptor in opened:
            os.close(descriptor)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_a_kept_alive_connection_past_descriptor_1024_serves_the_next_push(
    deliver, descriptors_from_1024
):
    gateway = CannedGateway([OK, OK, OK])
    assert deliver(gateway) == 7
    origin = ("http", "127.0.0.1", gateway.listener.getsockname()[1])
    [connection] = push._local.pool._idle[origin]
    assert connection.transport.get_extra_info("socket").fileno() >= 1024
    # select() refused such a descriptor: every push on a reused connection failed.
    assert deliver(gateway) == 7
    assert deliver(gateway) == 7
    assert (gateway.connections, gateway.requests) == (1, 3)
