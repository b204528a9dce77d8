"""A release goes only to a version its service has registered instances of (V9 that nothing
runs is refused, naming the versions that do run), and a bundle's members too."""

import pytest

from registry_sync.models import Instance, Service
from releases.models import Release, ReleaseBundle

pytestmark = pytest.mark.django_db

STEPS = [{"targeted": True}, {"percent": 50}]


def test_a_version_no_instance_runs_is_refused_with_the_versions_that_do(api, fleet):
    client = api("operator")
    body = {"service": "user-app", "to_version": "V9", "steps": STEPS}
    response = client.post("/api/v1/releases/", body, format="json")
    assert response.status_code == 400
    assert response.json() == {
        "to_version": [
            "No instance of user-app is registered with version V9; registered versions: V1, V2."
        ]
    }
    assert not Release.objects.exists()
    # Once an instance of V9 registers (any state: one still warming up counts), it may.
    Instance.objects.create(
        service=Service.objects.get(name="user-app"),
        instance_id="10.0.0.9#7209",
        host="10.0.0.9",
        port=7209,
        version="V9",
        state=Instance.STARTING,
    )
    assert client.post("/api/v1/releases/", body, format="json").status_code == 201


def test_a_service_without_instances_names_none(api, fleet):
    Service.objects.create(name="pay-app")
    body = {"service": "pay-app", "to_version": "V2", "from_version": "V1", "steps": STEPS}
    response = api("operator").post("/api/v1/releases/", body, format="json")
    assert response.status_code == 400
    assert response.json()["to_version"] == [
        "No instance of pay-app is registered with version V2; registered versions: none."
    ]


def test_a_bundle_member_to_an_unregistered_version_refuses_the_bundle(api, fleet):
    body = {
        "name": "checkout",
        "releases": [
            {"service": "order-app", "to_version": "V2"},
            {"service": "user-app", "to_version": "V9"},
        ],
        "steps": STEPS,
    }
    response = api("operator").post("/api/v1/release-bundles/", body, format="json")
    assert response.status_code == 400
    assert response.json() == {
        "releases": [
            "user-app: to_version: No instance of user-app is registered with version V9; "
            "registered versions: V1, V2."
        ]
    }
    assert not ReleaseBundle.objects.exists() and not Release.objects.exists()
