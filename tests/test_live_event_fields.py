"""Live events show what the REST API shows: each TypedDict of events/payloads.py has its
serializer's fields, no more and no fewer, and what the serializer answers for real rows
has the types the TypedDict declares (mypy trusts them where publishers fill one in)."""

import inspect
import types
import typing
from datetime import timedelta
from typing import Any, get_args, get_origin, get_type_hints

import pytest
from django.utils import timezone
from rest_framework import serializers

from events import payloads
from gateways.models import Gateway
from gateways.serializers import GatewayStatusSerializer
from policy.models import Revision
from policy.publishing import load_state
from policy.serializers import RevisionSerializer
from registry_sync.models import Instance, Registry, Service
from registry_sync.serializers import InstanceSerializer
from releases.models import Release, ReleaseEvent
from releases.serializers import ReleaseEventSerializer, ReleaseSerializer

MIRRORED: dict[type, type[serializers.BaseSerializer]] = {
    payloads.InstanceFields: InstanceSerializer,
    payloads.GatewayStatusFields: GatewayStatusSerializer,
    payloads.RevisionFields: RevisionSerializer,
    payloads.ReleaseFields: ReleaseSerializer,
    payloads.ReleaseEventFields: ReleaseEventSerializer,
}


def _shown(serializer_class: type[serializers.BaseSerializer]) -> set[str]:
    return {name for name, field in serializer_class().fields.items() if not field.write_only}


def test_every_payload_is_held_to_a_serializer():
    declared = {
        value
        for value in vars(payloads).values()
        if inspect.isclass(value) and typing.is_typeddict(value)
    }
    assert declared == set(MIRRORED)


@pytest.mark.parametrize("payload", list(MIRRORED), ids=lambda payload: payload.__name__)
def test_a_payload_has_the_fields_of_its_serializer(payload):
    serializer = MIRRORED[payload]
    declared, shown = set(get_type_hints(payload)), _shown(serializer)
    assert declared - shown == set(), f"in {payload.__name__}, not in {serializer.__name__}"
    assert shown - declared == set(), f"in {serializer.__name__}, not in {payload.__name__}"


def _conforms(value: object, hint: Any) -> bool:
    """Whether a JSON value is of the type `hint` (the forms events/payloads.py uses)."""
    if hint is Any:
        return True
    origin, args = get_origin(hint), get_args(hint)
    if origin in (types.UnionType, typing.Union):
        return any(_conforms(value, arg) for arg in args)
    if hint is type(None):
        return value is None
    if origin is list:
        return isinstance(value, list) and all(_conforms(item, args[0]) for item in value)
    if origin is dict:
        return isinstance(value, dict) and all(
            _conforms(k, args[0]) and _conforms(v, args[1]) for k, v in value.items()
        )
    if hint is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, hint)


@pytest.fixture
def answers(db) -> dict[type, dict[str, Any]]:
    """What each serializer answers for a row whose optional fields are filled in."""
    now = timezone.now()
    registry = Registry.objects.create(name="reg-1", last_success_at=now)
    service = Service.objects.create(name="user-app", registry=registry)
    instance = Instance.objects.create(
        service=service,
        instance_id="i-1",
        host="127.0.0.1",
        port=8080,
        version="V1",
        metadata={"zone": "a"},
        last_seen=now,
        offline_intent=True,
        state=Instance.DRAINING,
        drain_until=now + timedelta(seconds=30),
    )
    load_state()  # revision 1
    gateway, _, _ = Gateway.objects.create_with_credentials(
        name="edge",
        last_seen=now,
        engine="envoy",
        engine_version="1.40",
        skipped=[{"record": "services.user-app", "reason": "bad"}],
        fronts=["user-app"],
        refused_samples=3,
        last_refused={"other-app": 3},
        last_refused_at=now,
    )
    release = Release.objects.create(
        service="user-app",
        from_version="V1",
        to_version="V2",
        steps=[{"percent": 10}],
        analysis={"interval_s": 60, "max_p95_ms": None},
    )
    event = ReleaseEvent.objects.create(
        release=release, kind="started", step=0, detail={"reason": "by hand"}
    )
    return {
        payloads.InstanceFields: InstanceSerializer(instance).data,
        payloads.GatewayStatusFields: GatewayStatusSerializer(
            gateway, context={"generation": 1, "now": now}
        ).data,
        payloads.RevisionFields: RevisionSerializer(Revision.objects.get(number=1)).data,
        payloads.ReleaseFields: ReleaseSerializer(release).data,
        payloads.ReleaseEventFields: ReleaseEventSerializer(event).data,
    }


@pytest.mark.parametrize("payload", list(MIRRORED), ids=lambda payload: payload.__name__)
def test_a_serializers_answer_has_the_payloads_types(payload, answers):
    answer = answers[payload]
    wrong = {
        name: value
        for name, hint in get_type_hints(payload).items()
        if not _conforms(value := answer[name], hint)
    }
    assert wrong == {}
