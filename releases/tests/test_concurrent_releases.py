"""Releases acting at once (CI runs this on PostgreSQL): every routing change is a publish
under the live document's lock, so none is lost; a lane being deleted while a release starts
in it ends with one of them refused, never a release under way in a lane that is gone."""

import threading

import pytest
from django.db import connection

from policy.models import Revision
from policy.publishing import load_state
from registry_sync.models import Instance, Service
from releases.models import Release

pytestmark = pytest.mark.django_db(transaction=True)

SERVICES = [f"svc-{n}" for n in range(6)]
ANALYSIS = {"interval_s": 5, "min_requests": 50}


def in_threads(work: list) -> list:
    """Run each callable in its own thread, all released at once; their answers in order
    (an exception is an answer too: a thread's is otherwise lost)."""
    start = threading.Barrier(len(work))
    answers: list = [None] * len(work)

    def run(n: int) -> None:
        try:
            start.wait()
            answers[n] = work[n]()
        except Exception as exc:
            answers[n] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(n,)) for n in range(len(work))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    return answers


@pytest.fixture
def operator(api):
    client = api("operator", "olga")
    policy = {"enabled": True, "routing": True, "users": ["1001"]}
    assert client.patch("/api/v1/policy/", policy, format="json").status_code == 200
    lane = {"name": "feature-x", "priority": 100, "match": {"users": ["2002"]}}
    assert client.post("/api/v1/lanes/", lane, format="json").status_code == 201
    for name in SERVICES:
        service = Service.objects.create(name=name)
        Instance.objects.bulk_create(
            Instance(
                service=service,
                instance_id=f"{name}-{version}",
                host="10.0.0.1",
                port=port,
                version=version,
            )
            for port, version in enumerate(("V1", "V2", "V3"), start=7201)
        )
    return client


def create(client, service, lane, to_version):
    body = {
        "service": service,
        "to_version": to_version,
        "lane": lane,
        "steps": [{"targeted": True}, {"percent": 5}, {"percent": 100}],
        "analysis": ANALYSIS,
    }
    response = client.post("/api/v1/releases/", body, format="json")
    assert response.status_code == 201, response.content
    return response.json()["id"]


def test_releases_in_two_lanes_of_many_services_at_once_lose_no_step(operator, api):
    releases = [
        (create(operator, service, lane, version), service, lane)
        for service in SERVICES
        for lane, version in (("gray", "V2"), ("feature-x", "V3"))
    ]
    clients = [api("operator", f"op-{n}") for n in range(len(releases))]
    revisions = Revision.objects.count()

    def start_and_advance(client, release_id):
        def work():
            started = client.post(f"/api/v1/releases/{release_id}/start/")
            advanced = client.post(f"/api/v1/releases/{release_id}/promote/")
            return started.status_code, advanced.status_code

        return work

    work = [start_and_advance(c, r[0]) for c, r in zip(clients, releases, strict=True)]
    assert in_threads(work) == [(200, 200)] * len(releases)

    document = load_state().document
    members = document["lanes"]["feature-x"]["members"]
    for service in SERVICES:
        assert document["services"][service] == {"gray": "V2", "percent": 5, "targeted": True}
        assert members[service] == {"version": "V3", "percent": 5, "targeted": True}
    # Two routing revisions per release, none lost, none applied twice.
    assert Revision.objects.count() == revisions + 2 * len(releases)
    for release_id, _, lane in releases:
        found = Release.objects.get(pk=release_id).routing_before
        assert found == {"prod": None, "member": {} if lane == "gray" else None}


def status_of(method, path):
    return lambda: method(path).status_code


def test_a_lane_deleted_while_a_release_starts_in_it(operator, api):
    deleter = api("operator", "dora")
    for n in range(4):
        lane = f"race-{n}"
        body = {"name": lane, "priority": 10 + n, "match": {"users": ["3003"]}}
        assert operator.post("/api/v1/lanes/", body, format="json").status_code == 201
        release_id = create(operator, SERVICES[n], lane, "V2")
        started, deleted = in_threads(
            [
                status_of(operator.post, f"/api/v1/releases/{release_id}/start/"),
                status_of(deleter.delete, f"/api/v1/lanes/{lane}/"),
            ]
        )
        state = Release.objects.get(pk=release_id).state
        lanes = load_state().document.get("lanes", {})
        assert (started, deleted) in ((200, 409), (409, 204)), (started, deleted)
        if started == 200:
            assert state == "running" and lanes[lane]["members"][SERVICES[n]]["version"] == "V2"
        else:
            assert state == "pending" and lane not in lanes
