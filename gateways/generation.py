"""The generation counter and this process's copy of the newest gateway document.

A bump builds the document once and stores it; every gateway, pulled or pushed, gets those
same bytes. Bumps run one at a time and each reads the state after the previous one
committed, so a higher generation never carries older state than a lower one.
"""

import logging
import threading
from datetime import datetime, timedelta

from django.db import connection, transaction
from django.utils import timezone

from events.outages import unavailable
from gateways.gateway_document import build_document
from gateways.models import DocumentService, Gateway, Generation
from gateways.signals import generation_made
from gateways.snapshot import Snapshot
from routing_engine import canonical_json

log = logging.getLogger(__name__)

# Generations older than this lose their row, except the newest of them: "behind since
# when" needs the generation that was current at any moment a gateway may still be behind.
HISTORY = timedelta(days=1)
# Key of the PostgreSQL advisory lock that serialises bumps ("gwgen" in ASCII).
_BUMP_LOCK = 0x6777_6765_6E


_cached: Snapshot | None = None
_cache_lock = threading.Lock()


def _remember(snapshot: Snapshot) -> None:
    global _cached
    with _cache_lock:
        # Two bumps' after-commit hooks may run out of order; keep the newer.
        if _cached is None or (snapshot.number, snapshot.created_at) > (
            _cached.number,
            _cached.created_at,
        ):
            _cached = snapshot


def newest_row() -> tuple[int, datetime] | None:
    return Generation.objects.order_by("-number").values_list("number", "created_at").first()


def revision_of(number: int) -> int | None:
    """The policy revision generation `number` was built from; None for a generation not
    made yet (0: no ack yet) or forgotten (older than HISTORY)."""
    return Generation.objects.filter(number=number).values_list("revision", flat=True).first()


def newest_number() -> int:
    """The current generation's number (the first generation is made on first use)."""
    newest = newest_row()
    return newest[0] if newest is not None else bump("first use", only_if_none=True)


def current() -> Snapshot:
    """The newest generation. Reads which one it is from the database; the bytes come from
    this process's copy when it has that generation."""
    global _cached
    newest = newest_row()
    if newest is None:
        bump("first use", only_if_none=True)
        newest = newest_row()
        assert newest is not None, "the first generation was just made"
    cached = _cached
    if cached is not None and (cached.number, cached.created_at) == newest:
        return cached
    with _cache_lock:
        if _cached is not None and (_cached.number, _cached.created_at) == newest:
            return _cached
        # A bump may have blanked this row's content meanwhile: then take the newer one.
        row = (
            Generation.objects.filter(number__gte=newest[0])
            .order_by("-number")
            .values_list("number", "created_at", "content")
            .first()
        )
        assert row is not None, "a generation is only blanked once a newer one exists"
        number, created_at, content = row
        _cached = Snapshot(number, created_at, content.encode())
        return _cached


def bump(reason: str, *, only_if_none: bool = False) -> int:
    """Make a new generation from the live state; returns its number. After commit, it is
    announced (gateways.signals.generation_made)."""
    with transaction.atomic():
        _serialise_bumps()
        latest = Generation.objects.order_by("-number").values_list("number", flat=True).first()
        if only_if_none and latest is not None:
            return latest
        number = (latest or 0) + 1
        document = build_document(number)
        body = canonical_json(document)
        now = timezone.now()
        Generation.objects.create(
            number=number,
            revision=document["revision"],
            checksum=document["checksum"],
            content=body,
            reason=reason[:255],
            created_at=now,
        )
        Generation.objects.filter(number__lt=number).exclude(content="").update(content="")
        _record_stays(number, set(document["services"]))
        snapshot = Snapshot(number, now, body.encode())
        transaction.on_commit(lambda: _announce(snapshot))
    log.info("Gateway document generation %s (%s).", number, reason)
    return number


def _serialise_bumps() -> None:
    # PostgreSQL: a lock held until this transaction ends. SQLite needs none: its
    # transactions start IMMEDIATE (settings), which takes the database's write lock.
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [_BUMP_LOCK])


def _record_stays(number: int, names: set[str]) -> None:
    """Generation `number` holds these services: open a stay for each new one, close the
    stays of those it no longer holds."""
    present = set(
        DocumentService.objects.filter(until_generation=None).values_list("name", flat=True)
    )
    gone = present - names
    if gone:
        DocumentService.objects.filter(until_generation=None, name__in=gone).update(
            until_generation=number
        )
    DocumentService.objects.bulk_create(
        [DocumentService(name=name, first_generation=number) for name in sorted(names - present)]
    )


def prune(now: datetime) -> None:
    """Forget generations older than HISTORY but the newest of them (the periodic sweep),
    and the stays of services that ended before it."""
    oldest_kept = (
        Generation.objects.filter(created_at__lte=now - HISTORY)
        .order_by("-number")
        .values_list("number", flat=True)
        .first()
    )
    if oldest_kept is not None:
        Generation.objects.filter(number__lt=oldest_kept).delete()
        DocumentService.objects.filter(until_generation__lte=oldest_kept).delete()


def _announce(snapshot: Snapshot) -> None:
    _remember(snapshot)
    generation_made.send_robust(sender=Generation, snapshot=snapshot)


def behind_for_longer_than(seconds: float, now: datetime | None = None) -> int:
    """How many gateways have been behind the current generation for more than `seconds`:
    those older than that whose ack is below the generation that was current back then."""
    since = (now or timezone.now()) - timedelta(seconds=seconds)
    then_current = (
        Generation.objects.filter(created_at__lte=since)
        .order_by("-number")
        .values_list("number", flat=True)
        .first()
    )
    if then_current is None:
        return 0
    return Gateway.objects.filter(acked_generation__lt=then_current, created_at__lte=since).count()


def on_revision_published(sender, revision, **kwargs) -> None:
    _bump_after_change(f"revision {revision.number}")


def on_routable_instances_changed(sender, services, **kwargs) -> None:
    names = sorted(services)
    shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
    _bump_after_change(f"instances of {shown}")


def _bump_after_change(reason: str) -> None:
    # These run after the change committed: failing here would fail a request whose change
    # is already saved. The periodic sweep (gateways.tasks) repairs a missed bump.
    try:
        bump(reason)
    except Exception as exc:
        cause = unavailable(exc)
        if cause is None:
            log.exception("Could not make a new gateway generation (%s).", reason)
        else:
            log.warning(
                "No new gateway generation (%s): %s is unavailable; the sweep repairs it.",
                reason,
                cause,
            )
