"""The pull long poll against a real uvicorn (a subprocess on the test database)."""

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from django.conf import settings

from accounts.models import ApiToken
from gateways import generation
from gateways.models import Gateway

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]
CONFIG = "/api/v1/gateway-config/"


@pytest.fixture
def operator_key(make_user):
    return ApiToken.objects.issue(make_user("olga", "operator"))[1]


def auth(key: str) -> dict:
    return {"Authorization": f"Token {key}"}


def publish(server, operator_key: str, percent: int) -> None:
    response = httpx.patch(
        server.url + "/api/v1/policy/", json={"percent": percent}, headers=auth(operator_key)
    )
    assert response.status_code == 200, response.text


def current_generation(server, token: str) -> int:
    response = httpx.get(server.url + CONFIG, headers=auth(token))
    assert response.status_code == 200, response.text
    return response.json()["generation"]


def start_poll(pool, server, token, known):
    """A gateway's long poll (up to 20 s), running in `pool`."""
    return pool.submit(
        httpx.get,
        server.url + CONFIG,
        params={"known": known, "wait": 20},
        headers=auth(token),
        timeout=30,
    )


def test_a_long_poll_answers_promptly_when_a_new_generation_exists(
    server, make_gateway, operator_key
):
    _, token, _ = make_gateway()
    known = current_generation(server, token)
    with ThreadPoolExecutor(1) as pool:
        poll = start_poll(pool, server, token, known)
        time.sleep(0.5)
        assert not poll.done(), "the poll must wait while nothing changed"
        started = time.monotonic()
        publish(server, operator_key, 7)
        response = poll.result(timeout=10)
        elapsed = time.monotonic() - started
    assert response.status_code == 200
    document = response.json()
    assert document["generation"] == known + 1
    assert document["gray"]["percent"] == 7
    assert response.headers["ETag"] == f'"{known + 1}"'
    assert elapsed < 1.0, f"answered {elapsed * 1000:.0f} ms after the publish started"


def test_a_long_poll_answers_304_after_wait_seconds(server, make_gateway):
    gateway, token, _ = make_gateway()
    known = current_generation(server, token)
    started = time.monotonic()
    response = httpx.get(
        server.url + CONFIG, params={"known": known, "wait": 0.5}, headers=auth(token)
    )
    elapsed = time.monotonic() - started
    assert response.status_code == 304
    assert response.headers["ETag"] == f'"{known}"'
    assert 0.5 <= elapsed < 10 * 0.5  # at its wait's end, not before, nor long after
    gateway.refresh_from_db()
    assert gateway.last_seen is not None, "each poll records that the gateway was seen"


def test_an_old_known_generation_is_answered_at_once(server, make_gateway, operator_key):
    _, token, _ = make_gateway()
    known = current_generation(server, token)
    publish(server, operator_key, 9)
    started = time.monotonic()
    response = httpx.get(
        server.url + CONFIG, params={"known": known, "wait": 30}, headers=auth(token)
    )
    assert response.status_code == 200
    assert response.json()["generation"] == known + 1
    assert time.monotonic() - started < 1
    # A gateway ahead of the control plane (its database was restored) is not kept waiting.
    ahead = httpx.get(
        server.url + CONFIG, params={"known": known + 100, "wait": 30}, headers=auth(token)
    )
    assert ahead.status_code == 200
    assert ahead.json()["generation"] == known + 1


def test_fifty_concurrent_long_polls_do_not_exhaust_the_server(server, make_gateway, operator_key):
    tokens = [make_gateway(f"gw-{n}")[1] for n in range(50)]
    known = current_generation(server, tokens[0])
    threads_before = server.threads()

    async def run() -> tuple[list[httpx.Response], int, float]:
        limits = httpx.Limits(max_connections=100)
        async with httpx.AsyncClient(base_url=server.url, timeout=30, limits=limits) as client:
            polls = [
                asyncio.create_task(
                    client.get(CONFIG, params={"known": known, "wait": 30}, headers=auth(t))
                )
                for t in tokens
            ]
            await asyncio.sleep(1.5)
            assert not any(poll.done() for poll in polls), "all 50 must be waiting"
            threads_waiting = server.threads()
            # The server still answers other requests while 50 gateways wait.
            assert (await client.get("/healthz")).status_code == 200
            started = time.monotonic()
            await asyncio.to_thread(publish, server, operator_key, 11)
            responses = await asyncio.wait_for(asyncio.gather(*polls), 10)
            return responses, threads_waiting, time.monotonic() - started

    responses, threads_waiting, elapsed = asyncio.run(run())
    assert [r.status_code for r in responses] == [200] * 50
    assert {r.json()["generation"] for r in responses} == {known + 1}
    assert len({r.content for r in responses}) == 1, "every gateway gets the same bytes"
    assert elapsed < 5.0  # woken by the publish: their own wait is 30 s
    # A waiting gateway is a coroutine, not a thread (gateways/protocol/asgi.py).
    assert threads_waiting - threads_before < 10, (threads_before, threads_waiting)
    assert Gateway.objects.filter(last_seen__isnull=False).count() == 50


@pytest.mark.skipif(
    not settings.REDIS_URL, reason="needs REDIS_URL (CI sets it): wake-ups across processes"
)
def test_a_generation_made_in_another_process_wakes_the_servers_pollers(server, make_gateway):
    _, token, _ = make_gateway()
    known = current_generation(server, token)
    with ThreadPoolExecutor(1) as pool:
        poll = start_poll(pool, server, token, known)
        # The poll is waiting before the change (nothing in the server to ask): one made after
        # it would be answered at once and show nothing of the wake-up across processes.
        time.sleep(0.5)
        started = time.monotonic()
        # This test process stands in for a Celery worker noticing an instance change.
        generation.bump("instances of user-app")
        response = poll.result(timeout=10)
        elapsed = time.monotonic() - started
    assert response.status_code == 200
    assert response.json()["generation"] == known + 1
    assert elapsed < 1.0


def test_credentials_and_parameters(server, make_gateway, make_user):
    _, token, _ = make_gateway()
    admin_key = ApiToken.objects.issue(make_user("ada", "admin"))[1]
    url = server.url + CONFIG
    missing = httpx.get(url)
    assert missing.status_code == 401
    assert missing.headers["WWW-Authenticate"] == "Token"
    assert httpx.get(url, headers=auth("not-a-token")).status_code == 401
    assert httpx.get(url, headers=auth(admin_key)).status_code == 403
    assert httpx.post(url, headers=auth(token)).status_code == 405
    for params, field in (
        ({"known": "abc"}, "known"),
        ({"known": "-1"}, "known"),
        ({"wait": "61"}, "wait"),
        ({"wait": "-1"}, "wait"),
        ({"wait": "soon"}, "wait"),
        ({"wait": "nan"}, "wait"),
        ({"applied": "²"}, "applied"),
    ):
        response = httpx.get(url, params=params, headers=auth(token))
        assert response.status_code == 400, params
        assert field in response.json()


def test_a_held_poll_has_recorded_the_ack_it_carries(server, make_gateway, operator_key):
    """`applied=N` is recorded when the poll arrives, not when it is answered: the gateway
    is in sync while its poll waits for the next generation."""
    gateway, token, _ = make_gateway()
    known = current_generation(server, token)
    with ThreadPoolExecutor(1) as pool:
        poll = pool.submit(
            httpx.get,
            server.url + CONFIG,
            params={"known": known, "wait": 20, "applied": known},
            headers=auth(token),
            timeout=30,
        )
        deadline = time.monotonic() + 5
        while Gateway.objects.get(pk=gateway.pk).acked_generation != known:
            assert time.monotonic() < deadline, "the ack carried by the poll"
            time.sleep(0.05)
        assert not poll.done(), "the poll still waits"
        publish(server, operator_key, 7)
        assert poll.result(timeout=10).status_code == 200
    gateway.refresh_from_db()
    assert gateway.acked_at is not None and gateway.last_error == ""


def test_a_burst_of_acks_each_gets_its_own_answer(server, make_gateway):
    """Acks that arrive together are recorded together (gateways/protocol/call_batch.py);
    each caller still gets the answer to its own call, refusals included."""
    gateways = [make_gateway(f"gw-{n}") for n in range(30)]
    current = current_generation(server, gateways[0][1])
    calls = [
        (f"gw-{n}", token, {"generation": current}) for n, (_, token, _) in enumerate(gateways)
    ]
    calls += [
        ("gw-0", "not-a-token", {"generation": current}),  # 401
        ("gw-1", gateways[2][1], {"generation": current}),  # gw-2 acking for gw-1: 403
        ("gw-3", gateways[3][1], {"generation": current + 5}),  # does not exist yet: 400
        ("gw-4", gateways[4][1], {"generation": "new"}),  # 400
    ]

    async def run() -> list[httpx.Response]:
        limits = httpx.Limits(max_connections=100)
        async with httpx.AsyncClient(base_url=server.url, timeout=30, limits=limits) as client:
            return await asyncio.gather(
                *(
                    client.post(f"/api/v1/gateways/{name}/ack/", json=body, headers=auth(key))
                    for name, key, body in calls
                )
            )

    responses = asyncio.run(run())
    assert [r.status_code for r in responses] == [200] * 30 + [401, 403, 400, 400]
    assert [r.json()["name"] for r in responses[:30]] == [f"gw-{n}" for n in range(30)]
    assert {r.json()["status"] for r in responses[:30]} == {"in_sync"}
    assert "generation" in responses[-2].json() and "generation" in responses[-1].json()
    assert Gateway.objects.filter(acked_generation=current, acked_at__isnull=False).count() == 30


def test_an_ack_may_say_which_engine_runs_the_generation(server, make_gateway):
    """`python -m dataplane.agent` acks with its engine and version: the gateway's row
    keeps them; half of the pair, or a non-text, is a 400 that records nothing."""
    gateway, token, _ = make_gateway("gw-edge")
    current = current_generation(server, token)
    url = server.url + "/api/v1/gateways/gw-edge/ack/"
    for bad in ({"engine": "envoy"}, {"engine": "envoy", "engine_version": 140}):
        response = httpx.post(url, json={"generation": current, **bad}, headers=auth(token))
        assert response.status_code == 400 and "engine" in response.json()
    gateway.refresh_from_db()
    assert (gateway.acked_generation, gateway.engine) == (0, None)
    body = {"generation": current, "engine": "envoy", "engine_version": "1.40.0"}
    assert httpx.post(url, json=body, headers=auth(token)).status_code == 200
    gateway.refresh_from_db()
    assert (gateway.acked_generation, gateway.engine, gateway.engine_version) == (
        current,
        "envoy",
        "1.40.0",
    )
