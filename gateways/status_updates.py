"""Gateway status on the live stream: a `gateway` message with the gateway's API fields
whenever its status may have changed (new generation, poll, ack, delivery attempt).

Events are coalesced and sent by a background thread once they pause for QUIET_SECONDS
(LATEST_SECONDS after the first at the latest): a new generation changes every gateway at
once, then their acks follow within milliseconds, and building and sending a message per
gateway and event, inside the publish request and the deliveries, would delay the very acks
the page is about. Sent when the burst has settled, the page gets each gateway's final state
once, and the work of sending it does not compete with the burst. With no page open (the
in-memory channel layer knows; events.watched), nothing is read or built at all: a large
share of the server's CPU per publish with 50 gateways (`bench/propagation.py`, this
thread's CPU; the figure is in bench/README.md).
"""

import logging
import os
import threading
import time
from typing import cast

from django.db import close_old_connections
from django.utils import timezone

import events
from events.outages import unavailable
from gateways.generation import newest_row
from gateways.models import Gateway
from gateways.serializers import GatewayStatusSerializer

log = logging.getLogger(__name__)
QUIET_SECONDS = 0.05
LATEST_SECONDS = 0.5

_lock = threading.Lock()
_changed: set[int] = set()
_wake = threading.Event()
_everyone = False  # every gateway changed (a new generation)
_sender: tuple[int, threading.Thread] | None = None  # (pid, thread): restarted after a fork


def changed(*gateway_ids: int) -> None:
    """Announce, soon, the current state of these gateways."""
    _note(set(gateway_ids), everyone=False)


def all_changed() -> None:
    """Announce, soon, the current state of every gateway (a new generation)."""
    _note(set(), everyone=True)


def on_generation_made(sender, snapshot, **kwargs) -> None:
    all_changed()


def _note(gateway_ids: set[int], *, everyone: bool) -> None:
    global _sender, _everyone
    with _lock:
        _changed.update(gateway_ids)
        _everyone = _everyone or everyone
        if _sender is None or _sender[0] != os.getpid() or not _sender[1].is_alive():
            thread = threading.Thread(target=_send_forever, name="gateway-live", daemon=True)
            _sender = (os.getpid(), thread)
            thread.start()
    _wake.set()


def _send_forever() -> None:
    global _everyone
    while True:
        _wake.wait()
        first = time.monotonic()
        while True:
            _wake.clear()
            left = LATEST_SECONDS - (time.monotonic() - first)
            if left <= 0 or not _wake.wait(min(QUIET_SECONDS, left)):
                break
        with _lock:
            ids, everyone = set(_changed), _everyone
            _changed.clear()
            _everyone = False
        try:
            _send(None if everyone else ids)
        except Exception as exc:
            # The page is a view of the database; a lost event must not stop later ones.
            cause = unavailable(exc)
            if cause is None:
                log.exception("Could not broadcast the status of gateways %s.", sorted(ids))
            else:
                log.warning("Could not broadcast the status of gateways: %s is unavailable.", cause)


def _send(ids: set[int] | None) -> None:
    """The state of these gateways (None: of all). Reads only: a status message must never
    be what creates data."""
    if ids is not None and not ids:
        return
    if not events.watched():
        return  # a page opened later renders the gateways' state from the database
    close_old_connections()
    try:
        chosen = Gateway.objects.all() if ids is None else Gateway.objects.filter(pk__in=ids)
        gateways = list(chosen)
        if not gateways:
            return
        latest = newest_row()
        context = {"generation": latest[0] if latest else 0, "now": timezone.now()}
        serialized = GatewayStatusSerializer(gateways, many=True, context=context).data
        events.publish(
            *(
                events.GatewayStatusChanged(cast(events.GatewayStatusFields, dict(row)))
                for row in serialized
            )
        )
    finally:
        close_old_connections()
