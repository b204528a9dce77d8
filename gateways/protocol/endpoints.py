"""The two endpoints gateways call, with their own gateway token (users' tokens get 403,
even an admin's: a call is also the gateway saying it is alive):

* `GET /api/v1/gateway-config/?known=<generation>&wait=<seconds>[&applied=<generation>]`:
  the document, at once if its generation is not `known`, else as soon as a newer one
  exists, else 304 after `wait` s. (A `known` above the current generation is answered at
  once too: the control plane's database went back in time, and the gateway must not wait
  for it forever.) `applied=N` is the ack `{"generation": N}` folded into the poll, recorded
  as that ack would be (one exchange fewer per gateway and generation); a generation that
  does not exist yet is not recorded, and the poll is answered all the same.
* `POST /api/v1/gateways/{name}/ack/` `{"generation": N}`: the gateway runs generation N.
  Only for itself (else 403); acks never go backwards; a generation that does not exist
  yet is 400. Answers `{"name", "acked_generation", "status"}`. With `"error": "..."` the
  gateway refused generation N (it keeps running what it ran): the error is recorded as
  its `last_error` and its acked generation stays. With `"skipped": [{"record", "reason"}]`
  it runs generation N without those records: it is acked all the same (in sync), and the
  list is kept with it until it acks a newer one.

Every poll answer names the gateway that asked (header `X-Graylane-Gateway`), so a gateway
given only its token learns the name its acks go to.

Every new generation brings every gateway back at once, so these calls are kept lean: the
answers are made here, once, from plain values (`poll`, `ack` -> `Answer`). The server
calls them straight from ASGI (protocol/asgi.py), without Django's request machinery or
middleware (the endpoints authenticate themselves and use no session, cookie or CSRF);
the DRF views of protocol/views.py call the same functions for everything else (the URL
conf, the test client, the OpenAPI document). A waiting gateway is a coroutine awaiting an
announcement (protocol/wakeup.py), not a thread, and the database work of calls is done in
batches (protocol/call_batch.py). Errors have DRF's shapes (`{"detail": ...}`,
`{"field": [...]}`). The protocol as a whole: docs/gateway-protocol.md.
"""

import asyncio
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from gateways.authentication import token_key
from gateways.protocol import call_batch, wakeup
from gateways.protocol.call_batch import Ack, Poll, Refusal
from gateways.snapshot import Snapshot
from routing_engine import has_control_characters

MAX_WAIT = 60.0
NAME_HEADER = "X-Graylane-Gateway"
# As long as a recorded delivery error (gateways.acks.MAX_ERROR_LENGTH).
MAX_ACK_ERROR_LENGTH = 2000
MAX_ENGINE_LENGTH = 32
# An ack's skipped records (dataplane/gateway/config_client.py sends at most these).
MAX_SKIPPED = 50
MAX_RECORD_LENGTH = 600
MAX_REASON_LENGTH = 400
# A generation is a 64-bit integer: more digits than this is no generation (and Python
# refuses to parse thousands of digits).
MAX_GENERATION_DIGITS = 19
# While announcements from other processes cannot arrive (Redis unreachable), waiting
# pollers look at the database this often instead.
RECHECK_SECONDS = 5.0


@dataclass(frozen=True)
class Answer:
    status: int
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)


def _json(status: int, content: dict, **headers: str) -> Answer:
    body = json.dumps(content).encode()
    return Answer(status, body, {"Content-Type": "application/json", **headers})


def _refused(refusal: Refusal) -> Answer:
    if refusal.status == 401:
        return _json(401, refusal.body, **{"WWW-Authenticate": "Token"})
    return _json(refusal.status, refusal.body)


def _not_allowed(allowed: str) -> Answer:
    return _json(405, {"detail": "Method not allowed."}, Allow=allowed)


def body_too_large(limit: int) -> Answer:
    """A body over GATEWAY_MAX_BODY_BYTES, refused before it is read (or read further) and
    before the caller is authenticated; the connection is then closed."""
    detail = f"The request body is larger than {limit} bytes."
    return _json(413, {"detail": detail}, Connection="close")


def content_length_refusal(content_length: str | None, limit: int) -> Answer | None:
    """The answer to a request announcing this Content-Length, when it is refused."""
    if content_length is None:
        return None
    raw = content_length.strip()
    if not (raw.isascii() and raw.isdigit()):
        return _json(400, {"detail": "A bad Content-Length header."})
    return body_too_large(limit) if len(raw) > 18 or int(raw) > limit else None


# An invalid Host header (not in ALLOWED_HOSTS), answered as Django answers it under /api/.
BAD_HOST = _json(400, {"detail": "Bad request."})


def _document(snapshot: Snapshot, name: str) -> Answer:
    headers = {
        "Content-Type": "application/json",
        "ETag": f'"{snapshot.number}"',
        NAME_HEADER: name,
    }
    return Answer(200, snapshot.body, headers)


async def poll(method: str, authorization: str, query: Mapping[str, str]) -> Answer:
    """`GET gateway-config/`: `query` maps each parameter to its (last) value."""
    if method != "GET":
        return _not_allowed("GET")
    covered = await wakeup.announcements_arrive()
    ticket = wakeup.watch.ticket()
    key = token_key(authorization)
    if key is None:
        return _refused(call_batch.UNAUTHENTICATED)
    try:
        known, wait, applied = _poll_parameters(query)
    except _BadParameter as exc:
        # Nothing is recorded; the caller is still checked first (401/403 before 400).
        caller = await call_batch.submit(Poll(key))
        if isinstance(caller, Refusal):
            return _refused(caller)
        return _json(400, {exc.field: [exc.message]})
    answer = await call_batch.submit(Poll(key, applied))
    if isinstance(answer, Refusal):
        return _refused(answer)
    snapshot, name = answer.snapshot, answer.name
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait
    while snapshot.number == known:
        remaining = deadline - loop.time()
        if remaining <= 0:
            return Answer(304, headers={"ETag": f'"{snapshot.number}"', NAME_HEADER: name})
        timeout = remaining if covered else min(remaining, RECHECK_SECONDS)
        news = await wakeup.watch.wait(ticket, timeout)
        if news is None:
            if not covered:
                snapshot = await wakeup.current()
            continue
        ticket, announced = news
        if announced is None:  # made by another process: read it from the database
            snapshot = await wakeup.current()
        elif announced.number > snapshot.number:
            snapshot = announced
    return _document(snapshot, name)


class _BadParameter(Exception):
    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field
        self.message = message


def _poll_parameters(query: Mapping[str, str]) -> tuple[int, float, int | None]:
    """`known` (default -1: answer at once), `wait` in seconds (default 0), and `applied`
    (default None: no ack)."""
    known = -1 if "known" not in query else _generation(query, "known")
    applied = None if "applied" not in query else _generation(query, "applied")
    wait = 0.0
    if "wait" in query:
        try:
            wait = float(query["wait"])
        except ValueError:
            wait = math.nan
        if not 0 <= wait <= MAX_WAIT:
            raise _BadParameter("wait", f"Seconds to wait, from 0 to {MAX_WAIT:g}.")
    return known, wait, applied


def _generation(query: Mapping[str, str], parameter: str) -> int:
    raw = query[parameter].strip()
    # isascii: str.isdigit() also holds for digits int() refuses, such as "²".
    if not (raw.isascii() and raw.isdigit()) or len(raw) > MAX_GENERATION_DIGITS:
        raise _BadParameter(parameter, "A generation number (a non-negative integer).")
    return int(raw)


def _engine(parsed) -> tuple[str, str] | None | bool:
    """An ack's (engine, engine_version), None when it names none, False when malformed."""
    if not isinstance(parsed, dict) or ("engine" not in parsed and "engine_version" not in parsed):
        return None
    engine, version = parsed.get("engine"), parsed.get("engine_version")
    if not (isinstance(engine, str) and isinstance(version, str)):
        return False
    return (engine, version) if _short_text(engine) and _short_text(version) else False


def _short_text(value) -> bool:
    return isinstance(value, str) and bool(value.strip()) and len(value) <= MAX_ENGINE_LENGTH


def _skipped(parsed) -> tuple[dict[str, str], ...] | None:
    """An ack's skipped records, None when malformed."""
    raw = parsed.get("skipped") if isinstance(parsed, dict) else None
    if raw is None:
        return ()
    if not isinstance(raw, list) or len(raw) > MAX_SKIPPED:
        return None
    entries = []
    for entry in raw:
        if not isinstance(entry, dict) or set(entry) != {"record", "reason"}:
            return None
        record, reason = entry["record"], entry["reason"]
        for text, limit in ((record, MAX_RECORD_LENGTH), (reason, MAX_REASON_LENGTH)):
            if not _storable(text, limit):
                return None
        entries.append({"record": record, "reason": reason})
    return tuple(entries)


def _storable(text, limit: int) -> bool:
    """Non-empty text a JSON column takes on every backend (no NUL or other control
    character, no lone surrogate), of at most `limit` characters."""
    if not isinstance(text, str) or not text.strip() or len(text) > limit:
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return not has_control_characters(text)


async def ack(method: str, authorization: str, name: str, body: bytes) -> Answer:
    """`POST gateways/{name}/ack/`."""
    if method != "POST":
        return _not_allowed("POST")
    key = token_key(authorization)
    if key is None:
        return _refused(call_batch.UNAUTHENTICATED)
    try:
        parsed = json.loads(body)
        number = parsed["generation"]
    except (ValueError, KeyError, TypeError, RecursionError):  # RecursionError: deep nesting
        parsed, number = None, None
    if not isinstance(number, int) or isinstance(number, bool) or number < 0:
        number = None  # refused once the caller is known: 401/403 come before 400
    error = parsed.get("error") if isinstance(parsed, dict) else None
    engine = _engine(parsed)
    skipped = _skipped(parsed)
    invalid = None
    if engine is False:
        message = f"Both engine and engine_version, each a text of at most {MAX_ENGINE_LENGTH}."
        invalid = {"engine": [message]}
    elif error is not None and (
        not isinstance(error, str) or not error.strip() or len(error) > MAX_ACK_ERROR_LENGTH
    ):
        message = f"A non-empty text of at most {MAX_ACK_ERROR_LENGTH} characters, or absent."
        invalid = {"error": [message]}
    elif skipped is None:
        message = (
            f'At most {MAX_SKIPPED} objects {{"record", "reason"}}, each a non-empty text '
            f"without control characters (a record of at most {MAX_RECORD_LENGTH} characters, "
            f"a reason of at most {MAX_REASON_LENGTH}), or absent."
        )
        invalid = {"skipped": [message]}
    if invalid is not None:
        # Nothing is recorded; the caller is still checked first (401/403 before 400).
        caller = await call_batch.submit(Poll(key))
        if isinstance(caller, Refusal):
            return _refused(caller)
        if caller.name != name:
            return _json(403, {"detail": "A gateway acknowledges only for itself."})
        return _json(400, invalid)
    said = engine if isinstance(engine, tuple) else None
    answer = await call_batch.submit(Ack(key, name, number, error, said, skipped or ()))
    if isinstance(answer, Refusal):
        return _refused(answer)
    return _json(
        200,
        {"name": answer.name, "acked_generation": answer.acked_generation, "status": answer.status},
    )
