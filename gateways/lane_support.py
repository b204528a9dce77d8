"""Which lanes gateways cannot carry, as their acks say: a lane a gateway runs its generation
without is a skipped record `lanes[<name>]` (`lanes` when it could use none but gray;
docs/gateway-protocol.md, "Records, and what a gateway skips"). A Nacos-mode gateway, the
reference design's filter, carries the gray lane only.

A request is put in a lane where it enters, by the gateway in front of that service: a
service that only such gateways front never sends a request into the lane.
"""

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gateways.fronting import refusals
from gateways.models import Gateway

LANE_RECORD = re.compile(r"lanes\[(?P<lane>.+)\]\Z")
# The document's whole `lanes` unusable: no lane but gray applies.
ALL_LANES_RECORD = "lanes"


def skipped_lane(record: str) -> str | None:
    """The lane a skipped record names (`lanes[<name>]`), else None."""
    found = LANE_RECORD.match(record)
    return found["lane"] if found else None


def readable_skipped(skipped: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """A gateway's skipped records for the gateways page: each with `lane`, the lane it
    cannot carry (None when the record is no lane), and `all_lanes`."""
    return [
        {
            **entry,
            "lane": skipped_lane(entry["record"]),
            "all_lanes": entry["record"] == ALL_LANES_RECORD,
        }
        for entry in skipped
    ]


def cannot_carry(gateway: Gateway, lane: str) -> str | None:
    """Why `gateway` runs without `lane` (its skipped record's reason), else None."""
    for entry in gateway.skipped:
        if entry["record"] == ALL_LANES_RECORD or skipped_lane(entry["record"]) == lane:
            return str(entry["reason"])
    return None


@dataclass
class LaneCarriage:
    """What the gateways make of one lane."""

    # Gateway name -> why it runs without the lane.
    cannot_carry: dict[str, str] = field(default_factory=dict)
    # Member service -> the gateways fronting it, when none of them carries the lane.
    fronted_only_by_them: dict[str, list[str]] = field(default_factory=dict)
    # Some gateway fronts a member service, and none that does carries the lane.
    entered_nowhere: bool = False


def lane_carriage(lanes: Mapping[str, Iterable[str]]) -> dict[str, LaneCarriage]:
    """For each lane (name -> its member services): the gateways that cannot carry it, and
    its services that only such gateways front (gateways.fronting: the services of the
    generation a gateway acked, narrowed by its `fronts`). One query per gateway."""
    members = {lane: set(services) for lane, services in lanes.items()}
    services: set[str] = set().union(*members.values())
    gateways = list(Gateway.objects.all())
    fronted = {gateway.name: services - set(refusals(gateway, services)) for gateway in gateways}
    carriage = {}
    for lane, names in members.items():
        unable = {gateway.name: reason for gateway in gateways
                  if (reason := cannot_carry(gateway, lane)) is not None}  # fmt: skip
        front = {service: sorted(g for g, held in fronted.items() if service in held)
                 for service in sorted(names)}  # fmt: skip
        only = {service: by for service, by in front.items() if by and set(by) <= set(unable)}
        fronted_at_all = [service for service, by in front.items() if by]
        carriage[lane] = LaneCarriage(
            cannot_carry=unable,
            fronted_only_by_them=only,
            entered_nowhere=bool(fronted_at_all) and len(only) == len(fronted_at_all),
        )
    return carriage
