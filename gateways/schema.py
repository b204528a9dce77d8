"""The two endpoints gateways call (gateways/gateway_api.py), in the OpenAPI document.

They are answered straight from ASGI, without DRF, so drf-spectacular does not see them;
this postprocessing hook (SPECTACULAR_SETTINGS) describes them, so that whoever writes a
gateway finds them beside the rest of the API.
"""

from django.urls import reverse

from gateways.gateway_api import MAX_WAIT

DETAIL = {
    "type": "object",
    "properties": {"detail": {"type": "string"}},
    "required": ["detail"],
}
DOCUMENT = {
    "type": "object",
    "description": 'The gateway document (contract "What gateways get").',
    "properties": {
        "generation": {"type": "integer", "minimum": 1},
        "revision": {"type": "integer", "minimum": 1},
        "checksum": {"type": "string", "description": "sha256 of gray, versions, services"},
        "gray": {"type": "object", "description": "The policy's rules."},
        "versions": {"type": "object", "description": "Default prod and gray versions."},
        "services": {
            "type": "object",
            "description": "Per service: prod and gray versions, routable instances.",
            "additionalProperties": {"type": "object"},
        },
    },
    "required": ["generation", "revision", "checksum", "gray", "versions", "services"],
}
ACK = {
    "type": "object",
    "properties": {"generation": {"type": "integer", "minimum": 0}},
    "required": ["generation"],
}
ACKED = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "acked_generation": {"type": "integer"},
        "status": {"type": "string", "enum": ["in_sync", "pending", "failing", "stale"]},
    },
    "required": ["name", "acked_generation", "status"],
}
FIELD_ERRORS = {"type": "object", "additionalProperties": {"type": "array"}}


def _json(description: str, schema: dict) -> dict:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


REFUSALS = {
    "401": _json("No token, or not a valid one.", DETAIL),
    "403": _json("A user's token, or (ack) another gateway's name.", DETAIL),
}


def add_gateway_endpoints(result, generator, request, public):
    config_path = reverse("gateway-config")
    ack_path = reverse("gateway-ack", kwargs={"name": "NAME"}).replace("NAME", "{name}")
    security = [{"tokenAuth": []}]
    result["paths"][config_path] = {
        "get": {
            "operationId": "v1_gateway_config_retrieve",
            "description": (
                "The gateway document, for a gateway's own token. A long poll: with "
                "`known`, answered as soon as a newer generation exists, or 304 after "
                "`wait` seconds."
            ),
            "tags": ["v1"],
            "security": security,
            "parameters": [
                {
                    "in": "query",
                    "name": "known",
                    "schema": {"type": "integer", "minimum": 0},
                    "description": "The generation the gateway runs.",
                },
                {
                    "in": "query",
                    "name": "wait",
                    "schema": {"type": "number", "minimum": 0, "maximum": MAX_WAIT},
                    "description": "Seconds to wait for a newer generation (default 0).",
                },
            ],
            "responses": {
                "200": _json("The newest generation.", DOCUMENT),
                "304": {"description": "No newer generation within `wait` seconds."},
                "400": _json("A bad `known` or `wait`.", FIELD_ERRORS),
                **REFUSALS,
            },
        }
    }
    result["paths"][ack_path] = {
        "post": {
            "operationId": "v1_gateways_ack_create",
            "description": "The gateway runs this generation (acks never go backwards).",
            "tags": ["v1"],
            "security": security,
            "parameters": [
                {
                    "in": "path",
                    "name": "name",
                    "required": True,
                    "schema": {"type": "string", "pattern": "^[-a-zA-Z0-9_]+$"},
                }
            ],
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": ACK}},
            },
            "responses": {
                "200": _json("What was recorded.", ACKED),
                "400": _json("Not a generation, or one that does not exist yet.", FIELD_ERRORS),
                **REFUSALS,
            },
        }
    }
    return result
