"""contract fake of a push gateway (test code; not a real gateway): push gateways on
loopback, for the tests and bench/propagation.py. They speak the push protocol of
docs/gateway-protocol.md: verify signatures with gateways/signing.py and run only ever newer
generations, like a real gateway must."""

import json

from gateways import signing

from .http_fake import FakeHTTPServer, FakeRequest, FakeResponse


class PushGateway:
    """What a push gateway does with a delivery. `applied`: the generations it switched to,
    in order; `rejected`: why it refused deliveries (bad signature)."""

    def __init__(self, secret: str, **kwargs):
        super().__init__(**kwargs)
        self.secret = secret
        self.applied: list[int] = []
        self.rejected: list[str] = []

    @property
    def generation(self) -> int:
        return self.applied[-1] if self.applied else 0

    def receive(self, signature: str, body: bytes) -> tuple[int, bytes]:
        """(HTTP status, JSON body) of the answer to a delivery."""
        try:
            signing.verify(self.secret, signature, body)
        except signing.InvalidSignature as exc:
            self.rejected.append(str(exc))
            return 401, str(exc).encode()
        number = json.loads(body)["generation"]
        if number > self.generation:
            self.applied.append(number)
        return 200, b'{"generation": %d}' % self.generation


class PushReceiver(PushGateway, FakeHTTPServer):
    """A PushGateway behind a real HTTP server (threads); outages: `fail_with(503)`,
    `delay(seconds)` (testing/fakes/http_fake.py)."""

    def handle(self, request: FakeRequest) -> FakeResponse:
        status, body = self.receive(request.header(signing.HEADER), request.body)
        return FakeResponse(status, body, "application/json" if status == 200 else "text/plain")
