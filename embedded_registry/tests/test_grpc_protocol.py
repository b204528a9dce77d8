"""The Nacos 2.x gRPC server (embedded_registry/nacos_grpc/) driven with raw payloads: what
Nacos answers a bad one (its error codes, never a crash), the credentials of a request's
headers, and an instance's life bound to its connection, in the same table, audited as over
HTTP. (The real client: tests/test_nacos_grpc_client.py.)"""

import json
import queue
import threading
import time

import grpc
import pytest

from accounts.models import ApiToken
from audit.models import AuditEntry
from embedded_registry.models import EmbeddedInstance
from embedded_registry.nacos_grpc import payloads
from embedded_registry.nacos_grpc import server as server_module
from embedded_registry.nacos_grpc.server import NacosGrpcServer
from testing.processes import free_port

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

INSTANCE = {"ip": "10.0.0.7", "port": 7501, "weight": 1.0, "clusterName": "", "metadata": {}}


@pytest.fixture
def server():
    started = NacosGrpcServer("127.0.0.1", free_port())
    started.start()
    yield started
    started.stop()


class Client:
    """One HTTP/2 connection, as a Nacos client has: unary requests and, once `setup()`,
    the bi-directional stream that binds them to a connection."""

    def __init__(self, port: int):
        # A connection of its own, as Nacos clients ask: channels share them by default.
        self.channel = grpc.insecure_channel(
            f"127.0.0.1:{port}", options=[("grpc.use_local_subchannel_pool", 1)]
        )
        self._request = self.channel.unary_unary(
            "/Request/request", request_serializer=lambda b: b,
            response_deserializer=payloads.Payload.FromString,
        )  # fmt: skip
        self._outbox: queue.Queue = queue.Queue()
        self.pushed: queue.Queue = queue.Queue()
        self._stream = None

    def raw(self, data: bytes) -> tuple[str, dict]:
        answer = self._request(data, timeout=10)
        return answer.metadata.type, json.loads(answer.body.value)

    def send(self, kind: str, body: dict, headers: dict | None = None) -> tuple[str, dict]:
        payload = payloads.encode(kind, body)
        payload.metadata.headers.update(headers or {})
        return self.raw(payload.SerializeToString())

    def setup(self) -> None:
        stream = self.channel.stream_stream(
            "/BiRequestStream/requestBiStream", request_serializer=payloads.serialize,
            response_deserializer=payloads.Payload.FromString,
        )  # fmt: skip
        self._outbox.put(payloads.encode("ConnectionSetupRequest", {"clientVersion": "test"}))
        self._stream = stream(iter(self._outbox.get, None))
        threading.Thread(target=self._read, daemon=True).start()
        # The server opens the connection once it reads the setup request.
        deadline = time.monotonic() + 5
        while self.send("InstanceRequest", {})[1].get("errorCode") == 301:
            assert time.monotonic() < deadline, "the stream never opened the connection"
            time.sleep(0.02)

    def stream_send(self, data: object) -> None:
        self._outbox.put(data)

    def _read(self) -> None:
        try:
            for payload in self._stream:  # type: ignore[union-attr]
                self.pushed.put((payload.metadata.type, json.loads(payload.body.value)))
        except grpc.RpcError:
            pass

    def close(self) -> None:
        self._outbox.put(None)
        self.channel.close()


@pytest.fixture
def client(server):
    made = Client(server.port)
    yield made
    made.close()


@pytest.fixture
def token(make_user):
    return ApiToken.objects.issue(make_user("fleet", "service"))[1]


def register(service: str = "grpc-app", **instance) -> dict:
    return {"namespace": "public", "serviceName": service, "groupName": "DEFAULT_GROUP",
            "type": "registerInstance", "instance": {**INSTANCE, **instance},
            "requestId": "7"}  # fmt: skip


def eventually(check, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline
        time.sleep(0.05)


def test_server_check_and_health_check_answer_before_any_setup(client):
    kind, body = client.send("ServerCheckRequest", {"requestId": "1"})
    assert kind == "ServerCheckResponse"
    assert (body["resultCode"], body["errorCode"], body["requestId"]) == (200, 0, "1")
    assert body["connectionId"]
    assert client.send("HealthCheckRequest", {})[0] == "HealthCheckResponse"


@pytest.mark.parametrize(
    "data, code, message",
    [
        (payloads.encode("NoSuchRequest", {}).SerializeToString(), 302, "RequestHandler Not Found"),
        (b"\xff\xff\xff not protobuf", 502, "Invalid request"),
        (payloads.Payload(metadata={"type": "InstanceRequest"}, body={"value": b"{not json"})
         .SerializeToString(), 502, "Invalid request: body is not JSON"),
        (payloads.encode("InstanceRequest", []).SerializeToString(), 502,  # type: ignore[arg-type]
         "Invalid request: body is not a JSON object"),
        # A naming request on a connection that has not set up its stream (as Nacos: 301).
        (payloads.encode("InstanceRequest", register()).SerializeToString(), 301,
         "Connection is unregistered."),
    ],
    ids=["unknown type", "not protobuf", "malformed JSON", "not an object", "no setup"],
)  # fmt: skip
def test_bad_payloads_get_nacos_error_responses(client, data, code, message):
    kind, body = client.raw(data)
    assert kind == "ErrorResponse"
    assert (body["resultCode"], body["errorCode"]) == (500, code)
    assert body["message"].startswith(message)
    # The server is still there.
    assert client.send("ServerCheckRequest", {})[1]["resultCode"] == 200


@pytest.mark.parametrize(
    "request_body, message",
    [
        ({**register(), "serviceName": ""}, "Param 'serviceName' is required."),
        ({**register(), "instance": None}, "Param 'instance' is required."),
        (register(ip=""), "Param 'ip' is required."),
        (register(port="many"), "Param 'port' is illegal"),
        (register(weight=1e9), "instance format invalid: The weights range from 0.0 to 10000.0"),
        (register(service="bad name!"), "Param 'serviceName' is illegal"),
        ({**register(), "type": "explode"}, "Unsupported request type explode"),
    ],
)
def test_requests_missing_or_bad_fields_get_invalid_param(client, token, request_body, message):
    client.setup()
    kind, body = client.send("InstanceRequest", request_body, {"accessToken": token})
    assert kind == "ErrorResponse"
    assert (body["resultCode"], body["errorCode"]) == (500, 400)
    assert body["message"].startswith(message)
    assert not EmbeddedInstance.objects.exists()


def test_credentials_come_from_the_headers_and_refusals_are_the_handlers_response(
    client, token, make_user
):
    client.setup()
    for headers, message in (
        ({}, "user not found!"),
        ({"accessToken": "x:y:z"}, "token invalid!"),
        ({"username": "fleet", "password": "wrong"}, "unknown user!"),
    ):
        kind, body = client.send("InstanceRequest", register(), headers)
        assert kind == "InstanceResponse"
        assert (body["resultCode"], body["errorCode"], body["message"]) == (500, 403, message)
    make_user("vera", "viewer")
    viewer = {"username": "vera", "password": "pw-for-tests"}
    assert (
        client.send("InstanceRequest", register(), viewer)[1]["message"] == "authorization failed!"
    )
    assert not EmbeddedInstance.objects.exists()
    password = {"username": "fleet", "password": "pw-for-tests"}
    assert client.send("InstanceRequest", register(), password)[1]["resultCode"] == 200


def test_an_instance_lives_as_long_as_its_connection_and_both_ends_are_audited(server, token):
    owner, watcher = Client(server.port), Client(server.port)
    try:
        owner.setup()
        watcher.setup()
        kind, body = watcher.send(
            "SubscribeServiceRequest",
            {"namespace": "public", "serviceName": "grpc-app", "groupName": "DEFAULT_GROUP",
             "subscribe": True, "clusters": ""},
            {"accessToken": token},
        )  # fmt: skip
        assert (kind, body["serviceInfo"]["hosts"]) == ("SubscribeServiceResponse", [])

        kind, body = owner.send("InstanceRequest", register(), {"accessToken": token})
        assert (kind, body["resultCode"], body["type"]) == (
            "InstanceResponse",
            200,
            "registerInstance",
        )
        row = EmbeddedInstance.objects.get()
        assert (row.service, row.ip, row.port, row.ephemeral) == (
            "grpc-app",
            "10.0.0.7",
            7501,
            True,
        )
        kind, pushed = watcher.pushed.get(timeout=5)
        assert kind == "NotifySubscriberRequest"
        assert pushed["serviceInfo"]["name"] == "grpc-app"
        assert [h["instanceId"] for h in pushed["serviceInfo"]["hosts"]] == [row.instance_id]

        owner.close()  # its stream ends: its instance goes, as its own deregister would
        eventually(lambda: not EmbeddedInstance.objects.exists())
        kind, pushed = watcher.pushed.get(timeout=5)
        assert (kind, pushed["serviceInfo"]["hosts"]) == ("NotifySubscriberRequest", [])
        actions = list(
            AuditEntry.objects.filter(source="registry")
            .order_by("id")
            .values_list("actor", "action")
        )
        assert actions == [("fleet", "instance.register"), ("fleet", "instance.deregister")]
    finally:
        owner.close()
        watcher.close()


def test_garbage_on_the_stream_is_ignored(client, token):
    client.setup()
    client.stream_send(payloads.Payload(metadata={"type": "X"}, body={"value": b"]["}))
    client.stream_send(payloads.encode("NotifySubscriberResponse", {"requestId": "1"}))
    assert (
        client.send("InstanceRequest", register(), {"accessToken": token})[1]["resultCode"] == 200
    )


def test_a_drain_by_the_sync_is_pushed_to_subscribers(server, token):
    """The sync takes an instance out of traffic through the adapter (an update, which
    sends no signal): its subscribers see it disabled."""
    from embedded_registry.adapter import EmbeddedAdapter

    client = Client(server.port)
    try:
        client.setup()
        assert (
            client.send("InstanceRequest", register(), {"accessToken": token})[1]["resultCode"]
            == 200
        )
        subscription = {"namespace": "public", "serviceName": "grpc-app", "subscribe": True}
        client.send("SubscribeServiceRequest", subscription, {"accessToken": token})
        adapter = EmbeddedAdapter()
        (instance,) = adapter.list_instances("grpc-app")
        adapter.set_enabled(instance, False)
        # A subscriber is shown what is enabled, as Nacos lists it. (The register's own
        # push may come first, when the subscription was quicker than it.)
        kind, pushed = client.pushed.get(timeout=5)
        if pushed["serviceInfo"]["hosts"]:
            kind, pushed = client.pushed.get(timeout=5)
        assert (kind, pushed["serviceInfo"]["hosts"]) == ("NotifySubscriberRequest", [])
    finally:
        client.close()


def test_an_instance_that_stops_beating_is_pushed_unhealthy_then_healthy_again(
    server, token, registry_clock
):
    """An instance of a 1.x client (it beats over HTTP) whose beats stop: its subscribers
    are pushed it unhealthy once its beat timeout passed, not only when it is deleted; and
    pushed it healthy when it beats again. No row changes at either moment."""
    from embedded_registry import naming

    key = naming.InstanceKey("public", "DEFAULT_GROUP", "http-app", "DEFAULT", "10.0.0.9", 7502)
    naming.register(key, actor="test", weight=1.0, healthy=True, enabled=True, ephemeral=True,
                    metadata={})  # fmt: skip
    client = Client(server.port)
    try:
        client.setup()
        subscription = {"namespace": "public", "serviceName": "http-app", "subscribe": True}
        answer = client.send("SubscribeServiceRequest", subscription, {"accessToken": token})
        assert [h["healthy"] for h in answer[1]["serviceInfo"]["hosts"]] == [True]
        time.sleep(2 * server_module.HEALTH_CHECK_SECONDS)  # watched from now on
        assert client.pushed.empty()

        registry_clock.advance(naming.BEAT_TIMEOUT_MS / 1000 + 1)
        kind, pushed = client.pushed.get(timeout=5)
        assert kind == "NotifySubscriberRequest"
        assert [(h["ip"], h["healthy"]) for h in pushed["serviceInfo"]["hosts"]] == [
            ("10.0.0.9", False)
        ]
        assert naming.beat(key, None)
        kind, pushed = client.pushed.get(timeout=5)
        assert [(h["ip"], h["healthy"]) for h in pushed["serviceInfo"]["hosts"]] == [
            ("10.0.0.9", True)
        ]
        time.sleep(2 * server_module.HEALTH_CHECK_SECONDS)
        assert client.pushed.empty()  # once per change
    finally:
        client.close()


def test_auth_off_lets_a_loopback_peer_in_without_credentials(client, settings):
    settings.EMBEDDED_REGISTRY_AUTH = False
    client.setup()
    assert client.send("InstanceRequest", register())[1]["resultCode"] == 200
    entry = AuditEntry.objects.get(source="registry")
    assert (entry.actor, entry.action) == ("anonymous", "instance.register")
    # Credentials that are sent are still checked.
    refused = client.send("InstanceRequest", register(), {"accessToken": "x:y:z"})[1]
    assert (refused["errorCode"], refused["message"]) == (403, "token invalid!")
