"""20 writers edit the policy at once, each read-modify-write guarded by If-Match and
retried on 412: every one of their edits must survive (CI runs this on PostgreSQL)."""

import threading

import pytest
from django.db import connection

from policy.models import Revision

WRITERS = 20


@pytest.mark.django_db(transaction=True)
def test_twenty_concurrent_writers_lose_no_update(api):
    clients = [api("operator", f"writer-{n}") for n in range(WRITERS)]
    start = threading.Barrier(WRITERS)
    conflicts = []
    failures = []

    def writer(n: int, client):
        try:
            start.wait()
            for _attempt in range(200):
                current = client.get("/api/v1/policy/")
                users = current.json()["users"] + [f"user-{n}"]
                response = client.patch(
                    "/api/v1/policy/",
                    {"users": users},
                    format="json",
                    HTTP_IF_MATCH=current["ETag"],
                )
                if response.status_code == 200:
                    return
                assert response.status_code == 412, response.content
                conflicts.append(n)
            failures.append(f"writer {n} never got through")
        except Exception as exc:  # reported below; a thread's exception is otherwise lost
            failures.append(f"writer {n}: {exc!r}")
        finally:
            connection.close()

    threads = [threading.Thread(target=writer, args=(n, c)) for n, c in enumerate(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)

    assert not failures
    final = clients[0].get("/api/v1/policy/").json()
    assert sorted(final["users"]) == sorted(f"user-{n}" for n in range(WRITERS))
    # One revision per writer on top of the initial one: no write was applied twice or lost.
    assert final["revision"] == WRITERS + 1
    assert Revision.objects.count() == WRITERS + 1
    # The writers really raced: some of them were told their copy was stale.
    assert conflicts


@pytest.mark.django_db(transaction=True)
def test_twenty_concurrent_lane_editors_lose_no_member(api):
    """Each writer adds its own service to one lane's members, read-modify-write under
    If-Match, while the lane lives in the same document as the policy."""
    clients = [api("operator", f"lane-writer-{n}") for n in range(WRITERS)]
    assert clients[0].post("/api/v1/lanes/", {"name": "feature-x", "priority": 1},
                           format="json").status_code == 201  # fmt: skip
    start = threading.Barrier(WRITERS)
    failures: list[str] = []

    def writer(n: int, client) -> None:
        try:
            start.wait()
            for _attempt in range(200):
                current = client.get("/api/v1/lanes/feature-x/")
                members = {**current.json()["members"], f"svc-{n}": f"V{n}"}
                response = client.put(
                    "/api/v1/lanes/feature-x/",
                    {"priority": 1, "members": members},
                    format="json",
                    HTTP_IF_MATCH=current["ETag"],
                )
                if response.status_code == 200:
                    return
                assert response.status_code == 412, response.content
            failures.append(f"writer {n} never got through")
        except Exception as exc:  # reported below; a thread's exception is otherwise lost
            failures.append(f"writer {n}: {exc!r}")
        finally:
            connection.close()

    threads = [threading.Thread(target=writer, args=(n, c)) for n, c in enumerate(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not failures
    members = clients[0].get("/api/v1/lanes/feature-x/").json()["members"]
    assert members == {f"svc-{n}": {"version": f"V{n}", "percent": 0, "targeted": True}
                       for n in range(WRITERS)}  # fmt: skip
