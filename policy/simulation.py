"""What the gateway would do for a request, computed with the gateway's own engine."""

from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from django.conf import settings

from policy.documents import effective_versions
from policy.models import PolicyState
from registry_sync.models import Instance
from routing_engine import CallerResolver, GrayMatcher, lower_headers, select_instances

# Keyed by revision and when it was made: a database made anew counts revisions from 1 again.
_matchers: dict[tuple[int, object], GrayMatcher] = {}


@lru_cache(maxsize=1)
def _resolver(geoip_database: str, trusted_proxies: tuple[str, ...]) -> CallerResolver:
    return CallerResolver(trusted_proxies, geoip_database or None)


def caller_resolver() -> CallerResolver:
    """The gateway's resolver (routing_engine.caller), configured as the gateways are told
    to be (GEOIP_DATABASE, TRUSTED_PROXIES): one answer to "which city is this IP?"."""
    return _resolver(settings.GEOIP_DATABASE, tuple(settings.TRUSTED_PROXIES))


def matcher_for(state: PolicyState) -> GrayMatcher:
    """Compiling 100k users and 10k CIDRs takes a while, so keep one matcher per revision."""
    key = (state.revision, state.updated_at)
    matcher = _matchers.get(key)
    if matcher is None:
        document = state.document
        matcher = GrayMatcher(document["gray"], document["services"])
        _matchers.clear()
        _matchers[key] = matcher
    return matcher


def simulate(
    state: PolicyState,
    *,
    service: str | None,
    headers: Mapping[str, str] | None,
    ip: str | None,
    city: str | None,
    user: str | None,
) -> dict[str, Any]:
    """A simulated request is taken as one that came through a trusted proxy: its `ip` is
    the client's, its city header is believed. Without an explicit `city`, the city is the
    one a gateway would find: the city header's, else GeoIP's for `ip`."""
    headers = lower_headers(headers or {})
    document = state.document
    if city is None:
        city_header = headers.get(document["gray"]["city_header"].lower())
        city = caller_resolver().city(ip, city_header, trusted=True)
    matcher = matcher_for(state)
    decide = matcher.for_service(service) if service else matcher.decide
    decision = decide(headers, ip=ip, city=city or "", user=user)
    result: dict[str, Any] = {
        "flag": decision.flag,
        "matched": decision.matched,
        "city": city,
        "revision": state.revision,
        "version": None,
        "instances": [],
    }
    if not service:
        return result
    prod, gray = effective_versions(document, service)
    instances = list(
        Instance.objects.filter(service__name=service).values(
            "id", "instance_id", "host", "port", "version", "state", "weight"
        )
    )
    if not document["gray"]["routing"]:
        # `routing` off (the reference design's gray.load): the balancer ignores versions.
        chosen: list[Mapping[str, Any]] = [i for i in instances if i["state"] == "UP"]
        result["version"] = None
    else:
        result["version"], chosen = select_instances(instances, decision.flag, prod, gray)
    result["instances"] = chosen
    return result
