"""Taking a gateway's sampled requests: those of services it fronts (gateways/fronting.py,
as for its metrics) go to the sample store, unless sampling is off (TRAFFIC_SAMPLES)."""

from collections import Counter
from dataclasses import dataclass

from django.conf import settings

from gateways import fronting
from gateways.models import Gateway
from traffic import store
from traffic.samples import TrafficSample


@dataclass(frozen=True)
class Taken:
    accepted: int  # kept in the store
    dropped: int  # fronted, but not kept: over a cap, out of the window, or sampling off
    refused: dict[str, int]  # service -> samples of services the gateway does not front
    reasons: dict[str, str]  # service -> why


def take(gateway: Gateway, samples: list[TrafficSample]) -> Taken:
    reasons = fronting.refusals(gateway, {sample.service for sample in samples})
    fronted = [sample for sample in samples if sample.service not in reasons]
    refused = Counter(sample.service for sample in samples if sample.service in reasons)
    accepted = store.store().accept(fronted) if settings.TRAFFIC_SAMPLES else 0
    return Taken(accepted, len(fronted) - accepted, dict(refused), reasons)
