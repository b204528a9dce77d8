"""The two messages of Nacos 2.x's gRPC protocol (its nacos_grpc_service.proto), built at
import from descriptors, so nothing generated is committed or made at build time:

    message Metadata { string type = 3; string clientIp = 8; map<string, string> headers = 7; }
    message Payload { Metadata metadata = 2; google.protobuf.Any body = 3; }

`metadata.type` names the request or response class (`InstanceRequest`), `body.value` is its
JSON. They live in a pool of their own: a Nacos client's generated module in the same
process declares the same top-level names in the default pool."""

import json
from typing import Any

from google.protobuf import any_pb2, descriptor_pb2, descriptor_pool
from google.protobuf.message import DecodeError, Message
from google.protobuf.message_factory import GetMessageClass

from routing_engine import bounded_json

_F = descriptor_pb2.FieldDescriptorProto


def _pool() -> descriptor_pool.DescriptorPool:
    pool = descriptor_pool.DescriptorPool()
    any_file = descriptor_pb2.FileDescriptorProto()
    any_pb2.DESCRIPTOR.CopyToProto(any_file)
    pool.Add(any_file)
    proto = descriptor_pb2.FileDescriptorProto(
        name="nacos_grpc_service.proto", syntax="proto3", dependency=[any_file.name]
    )
    metadata = proto.message_type.add(name="Metadata")
    metadata.field.add(name="type", number=3, type=_F.TYPE_STRING, label=_F.LABEL_OPTIONAL)
    metadata.field.add(name="clientIp", number=8, type=_F.TYPE_STRING, label=_F.LABEL_OPTIONAL)
    metadata.field.add(
        name="headers",
        number=7,
        type=_F.TYPE_MESSAGE,
        label=_F.LABEL_REPEATED,
        type_name=".Metadata.HeadersEntry",
    )
    entry = metadata.nested_type.add(name="HeadersEntry")
    entry.field.add(name="key", number=1, type=_F.TYPE_STRING, label=_F.LABEL_OPTIONAL)
    entry.field.add(name="value", number=2, type=_F.TYPE_STRING, label=_F.LABEL_OPTIONAL)
    entry.options.map_entry = True
    payload = proto.message_type.add(name="Payload")
    payload.field.add(
        name="metadata", number=2, type=_F.TYPE_MESSAGE, label=_F.LABEL_OPTIONAL,
        type_name=".Metadata",
    )  # fmt: skip
    payload.field.add(
        name="body", number=3, type=_F.TYPE_MESSAGE, label=_F.LABEL_OPTIONAL,
        type_name=".google.protobuf.Any",
    )  # fmt: skip
    pool.Add(proto)
    return pool


_POOL = _pool()
Payload: Any = GetMessageClass(_POOL.FindMessageTypeByName("Payload"))


class BadPayload(ValueError):
    """A payload that is no request: Nacos answers it with BAD_GATEWAY and this text."""


def parse(data: bytes) -> Message | None:
    """A Payload from the wire; grpc hands undecodable bytes to the handler as None."""
    try:
        return Payload.FromString(data)
    except DecodeError:
        return None


def serialize(payload: Message) -> bytes:
    return payload.SerializeToString()


def decode(payload: Message | None) -> tuple[str, dict[str, Any], dict[str, str]]:
    """(type, body, headers) of a request payload, or BadPayload."""
    if payload is None:
        raise BadPayload("Invalid request")
    kind = payload.metadata.type
    try:
        body = bounded_json.loads(payload.body.value.decode("utf-8") or "{}")
    except (UnicodeDecodeError, ValueError) as exc:
        raise BadPayload(f"Invalid request: body is not JSON ({exc})"[:300]) from None
    if not isinstance(body, dict):
        raise BadPayload("Invalid request: body is not a JSON object")
    return kind, body, dict(payload.metadata.headers)


def encode(kind: str, body: dict[str, Any], client_ip: str = "") -> Message:
    payload = Payload()
    payload.metadata.type = kind
    if client_ip:
        payload.metadata.clientIp = client_ip
    payload.body.value = json.dumps(body, separators=(",", ":")).encode()
    return payload
