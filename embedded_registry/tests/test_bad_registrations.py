"""Input the embedded registry must refuse the Nacos way (400 with Nacos' text) rather than
fail on: JSON nested far deeper than any metadata, in `metadata` and in a beat."""

import json
from urllib.parse import urlencode

import pytest

from accounts.models import ApiToken
from embedded_registry.models import EmbeddedInstance

pytestmark = pytest.mark.django_db

NAMING, BEAT = "/nacos/v1/ns/instance", "/nacos/v1/ns/instance/beat"
INSTANCE = {"serviceName": "user-app", "ip": "10.0.0.5", "port": "7201"}
DEEP = 100_000


@pytest.fixture
def token(make_user):
    return ApiToken.objects.issue(make_user("fleet", "service"))[1]


def form(client, method: str, path: str, params: dict, token: str):
    return client.generic(
        method,
        path,
        urlencode({**params, "accessToken": token}),
        content_type="application/x-www-form-urlencoded",
    )


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


@pytest.mark.parametrize(
    "metadata",
    [
        nested(DEEP),
        '{"version": ' + nested(DEEP) + "}",
        '{"version": ' + nested(500) + "}",  # parses, but deeper than anything walks safely
        '{"version": "V1", "deep": ' + '{"a": ' * DEEP + "1" + "}" * DEEP + "}",
    ],
    ids=["array", "value", "value-500", "object"],
)
@pytest.mark.parametrize("method", ["POST", "PUT"])
def test_deeply_nested_metadata_is_a_nacos_400_and_registers_nothing(
    client, token, method, metadata
):
    response = form(client, method, NAMING, {**INSTANCE, "metadata": metadata}, token)
    assert response.status_code == 400
    assert response["Content-Type"].startswith("text/plain")
    assert response.content.decode().startswith("metadata format incorrect:")
    assert len(response.content) < 1000  # not the whole 100 KB echoed back
    assert not EmbeddedInstance.objects.exists()


def test_a_beat_nested_too_deep_is_a_nacos_400(client, token):
    deep_beat = json.dumps({**INSTANCE, "ip": "10.0.0.5", "port": 7201})[:-1]
    deep_beat += ', "metadata": {"version": ' + nested(DEEP) + "}}"
    response = form(client, "PUT", BEAT, {**INSTANCE, "beat": deep_beat}, token)
    assert response.status_code == 400
    assert response.content.decode().startswith("Param 'beat' is illegal:")
    assert len(response.content) < 1000
    assert not EmbeddedInstance.objects.exists()

    outright = form(client, "PUT", BEAT, {**INSTANCE, "beat": nested(DEEP)}, token)
    assert outright.status_code == 400
    assert outright.content.decode().startswith("Param 'beat' is illegal:")


def test_metadata_nested_a_little_still_registers_as_before(client, token):
    """Nacos metadata is a map of strings: a nested value is kept as its text, as before."""
    metadata = json.dumps({"version": "V1", "zone": {"name": "a"}})
    response = form(client, "POST", NAMING, {**INSTANCE, "metadata": metadata}, token)
    assert response.status_code == 200, response.content
    assert EmbeddedInstance.objects.get().metadata["version"] == "V1"
