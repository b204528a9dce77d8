"""How a request meeting an unavailable database or Redis is answered (graylane/outages.py),
and how work that follows a commit survives one (events/after_commit.py). The outage here is
real: a Redis port that nothing listens on (until a test starts one there). The writes
through a real server while Redis or PostgreSQL stops are in test_outages.py."""

import logging

import pytest
import redis
from django.db import transaction
from django.http import JsonResponse
from django.urls import path

from audit import log as audit_log
from audit.models import AuditEntry
from events.after_commit import after_commit, best_effort
from testing.processes import RedisServer, free_port
from testing.waiting import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True), pytest.mark.urls(__name__)]


def _redis_on(port: int) -> redis.Redis:
    return redis.Redis.from_url(f"redis://127.0.0.1:{port}/0", socket_timeout=1)


def _redis_nobody_listens_on() -> redis.Redis:
    return _redis_on(free_port())


def _audit(label: str) -> None:
    audit_log.record(actor="t", source="api", action="test.write", object_label=label,
                     before=None, after={})  # fmt: skip


def write_then_meet_redis_down(request):
    with transaction.atomic():
        _audit("saved first")
    _redis_nobody_listens_on().ping()
    return JsonResponse({"never": "answered"})


def bookkeep_then_meet_redis_down(request):
    """A statement on its own (autocommit), as a token's time of last use: not the change."""
    _audit("bookkeeping")
    _redis_nobody_listens_on().ping()


def meet_redis_down_inside_the_transaction(request):
    with transaction.atomic():
        _audit("rolled back")
        _redis_nobody_listens_on().ping()
    return JsonResponse({"never": "answered"})


urlpatterns = [
    path("api/test/saved-first/", write_then_meet_redis_down),
    path("api/test/rolled-back/", meet_redis_down_inside_the_transaction),
    path("api/test/bookkeeping/", bookkeep_then_meet_redis_down),
]


def test_redis_down_before_anything_was_saved_is_a_503_with_retry_after(client):
    response = client.post("/api/test/rolled-back/")
    assert response.status_code == 503
    assert response["Retry-After"] == "5"
    assert response.json() == {
        "detail": "Redis is unavailable: nothing was saved. Try again later."
    }
    assert not AuditEntry.objects.filter(object="rolled back").exists()


def test_bookkeeping_outside_a_transaction_is_not_the_change(client):
    assert client.post("/api/test/bookkeeping/").status_code == 503


def test_an_outage_after_the_change_was_saved_is_never_a_503(client, caplog):
    """A 503 would make the client send the change again: the answer says it was saved."""
    with caplog.at_level(logging.ERROR, logger="graylane.outages"):
        response = client.post("/api/test/saved-first/")
    assert response.status_code == 200
    assert "Saved" in response.json()["detail"]
    assert AuditEntry.objects.filter(object="saved first").count() == 1
    assert "saved, then Redis was unavailable" in caplog.text


def test_work_after_a_commit_waits_out_redis_and_keeps_its_order():
    port = free_port()
    client = _redis_on(port)
    done = []
    with transaction.atomic():
        _audit("the change")
        after_commit(lambda: done.append(client.rpush("log", "first")), "the first")
        after_commit(lambda: done.append("second"), "the second")
    assert AuditEntry.objects.filter(object="the change").exists()
    assert done == []  # the first is retried, the second waits behind it
    with RedisServer(port=port):
        wait_until(lambda: len(done) == 2, timeout=15, what="the backlog to be done")
        assert done == [1, "second"]
        assert client.lrange("log", 0, -1) == [b"first"]


def test_work_that_fails_for_another_reason_is_logged_and_not_retried(caplog):
    done = []
    with caplog.at_level(logging.ERROR, logger="events.after_commit"):
        best_effort(lambda: 1 / 0, "dividing by zero")
    best_effort(lambda: done.append("next"), "the next")
    assert done == ["next"]  # at once: nothing waits in the backlog
    assert "After a commit, dividing by zero failed; not retried." in caplog.text
