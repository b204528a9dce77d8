"""The two endpoints gateways call, with their own gateway token (users' tokens get 403,
even an admin's: a call is also the gateway saying it is alive):

* `GET /api/v1/gateway-config/?known=<generation>&wait=<seconds>`: the document, at once
  if its generation is not `known`, else as soon as a newer one exists, else 304 after
  `wait` s. (A `known` above the current generation is answered at once too: the control
  plane's database went back in time, and the gateway must not wait for it forever.)
* `POST /api/v1/gateways/{name}/ack/` `{"generation": N}`: the gateway runs generation N.
  Only for itself (else 403); acks never go backwards; a generation that does not exist
  yet is 400. Answers `{"name", "acked_generation", "status"}`.

Plain async views, not DRF (which is sync): a waiting gateway is a coroutine awaiting an
announcement (gateways.wakeup), not a thread. Database work runs in short calls on the
loop's shared executor (`thread_sensitive=False`, `_db`), never on a thread reserved for
one request; gateways/asgi.py keeps Django from reserving one anyway. Answers and errors have
DRF's shapes (`{"detail": ...}`, `{"field": [...]}`).
"""

import asyncio
import json
import math

from channels.db import database_sync_to_async
from django.http import HttpResponse, HttpResponseNotAllowed, JsonResponse
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt

from gateways import generation, live, wakeup
from gateways.auth import gateway_for_key, is_user_key, token_key
from gateways.delivery import record_ack
from gateways.generation import Snapshot
from gateways.models import Gateway

MAX_WAIT = 60.0
# While announcements from other processes cannot arrive (Redis unreachable), waiting
# pollers look at the database this often instead.
RECHECK_SECONDS = 5.0
# A poll records `last_seen` unless it is fresher than this: acks and re-polls come in
# bursts, and staleness is judged in tens of seconds.
LAST_SEEN_RESOLUTION_SECONDS = 1.0


def _db(function):
    # The loop's shared executor, with Django's connection handling around each call.
    return database_sync_to_async(function, thread_sensitive=False)


def _calling_gateway(authorization: str) -> Gateway | HttpResponse:
    """The gateway whose token this is, or the 401/403 answer."""
    key = token_key(authorization)
    gateway = gateway_for_key(key) if key else None
    if gateway is not None:
        return gateway
    if key and is_user_key(key):
        return JsonResponse(
            {"detail": "This endpoint is for gateways: use the gateway's own token."}, status=403
        )
    response = JsonResponse(
        {"detail": "Authentication credentials were not provided or are invalid."}, status=401
    )
    response["WWW-Authenticate"] = "Token"
    return response


async def gateway_config(request):
    if request.method != "GET":
        return HttpResponseNotAllowed(["GET"])
    covered = await wakeup.announcements_arrive()
    ticket = wakeup.watch.ticket()
    answer = await _db(_start_poll)(request.headers.get("Authorization", ""))
    if isinstance(answer, HttpResponse):
        return answer
    snapshot = answer
    try:
        known, wait = _poll_parameters(request.GET)
    except _BadParameter as exc:
        return JsonResponse({exc.field: [exc.message]}, status=400)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait
    while snapshot.number == known:
        remaining = deadline - loop.time()
        if remaining <= 0:
            response = HttpResponse(status=304)
            response["ETag"] = f'"{snapshot.number}"'
            return response
        timeout = remaining if covered else min(remaining, RECHECK_SECONDS)
        news = await wakeup.watch.wait(ticket, timeout)
        if news is None:
            if not covered:
                snapshot = await _db(generation.current)()
            continue
        ticket, announced = news
        if announced is None:  # made by another process: read it from the database
            snapshot = await _db(generation.current)()
        elif announced.number > snapshot.number:
            snapshot = announced
    response = HttpResponse(snapshot.body, content_type="application/json")
    response["ETag"] = f'"{snapshot.number}"'
    return response


def _start_poll(authorization: str) -> Snapshot | HttpResponse:
    """Authenticate, note that the gateway was seen, and read the newest generation."""
    gateway = _calling_gateway(authorization)
    if isinstance(gateway, HttpResponse):
        return gateway
    snapshot = generation.current()
    now = timezone.now()
    seen = gateway.last_seen
    if seen is None or (now - seen).total_seconds() >= LAST_SEEN_RESOLUTION_SECONDS:
        Gateway.objects.filter(pk=gateway.pk).update(last_seen=now)
        if gateway.status_at(snapshot.number, now) == Gateway.STALE:
            live.changed(gateway.pk)  # it is back
    return snapshot


class _BadParameter(Exception):
    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field
        self.message = message


def _poll_parameters(query) -> tuple[int, float]:
    """`known` (default -1: answer at once) and `wait` in seconds (default 0)."""
    known = -1
    if "known" in query:
        raw = query["known"].strip()
        if not raw.isdigit():
            raise _BadParameter("known", "A generation number (a non-negative integer).")
        known = int(raw)
    wait = 0.0
    if "wait" in query:
        try:
            wait = float(query["wait"])
        except ValueError:
            wait = math.nan
        if not 0 <= wait <= MAX_WAIT:
            raise _BadParameter("wait", f"Seconds to wait, from 0 to {MAX_WAIT:g}.")
    return known, wait


@csrf_exempt  # token authentication; no cookies involved
async def gateway_ack(request, name: str):
    if request.method != "POST":
        return HttpResponseNotAllowed(["POST"])
    return await _db(_ack)(request.headers.get("Authorization", ""), name, request.body)


def _ack(authorization: str, name: str, body: bytes) -> HttpResponse:
    gateway = _calling_gateway(authorization)
    if isinstance(gateway, HttpResponse):
        return gateway
    if gateway.name != name:
        return JsonResponse({"detail": "A gateway acknowledges only for itself."}, status=403)
    try:
        number = json.loads(body)["generation"]
    except (ValueError, KeyError, TypeError):
        number = None
    if not isinstance(number, int) or isinstance(number, bool) or number < 0:
        message = 'Send {"generation": N}, N a non-negative integer.'
        return JsonResponse({"generation": [message]}, status=400)
    current = generation.newest_number()
    if number > current:
        message = f"Generation {number} does not exist; the newest is {current}."
        return JsonResponse({"generation": [message]}, status=400)
    record_ack(gateway, number)
    gateway.acked_generation = max(gateway.acked_generation, number)
    gateway.last_seen = timezone.now()
    status = gateway.status_at(current, gateway.last_seen)
    return JsonResponse(
        {"name": name, "acked_generation": gateway.acked_generation, "status": status}
    )
