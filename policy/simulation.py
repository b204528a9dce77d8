"""What the gateway would do for a request, computed with the gateway's own engine."""

from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Any

from django.conf import settings

from policy.documents import effective_versions
from policy.lanes import gray_priority_of, lanes_of, quarantined_of, routing_of
from policy.models import PolicyState
from registry_sync.models import Instance
from routing_engine import CallerResolver, Decision, GrayMatcher, lower_headers
from routing_engine.balancer import select_asked
from routing_engine.hops import ask_for
from routing_engine.lanes import GRAY_LANE

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
        matcher = compile_matcher(state.document)
        _matchers.clear()
        _matchers[key] = matcher
    return matcher


def compile_matcher(document: dict[str, Any]) -> GrayMatcher:
    """The gateway's matcher of `document` (the live one, or a draft)."""
    lanes = {name: routing_of(lane) for name, lane in lanes_of(document).items()}
    return GrayMatcher(document["gray"], document["services"], lanes, gray_priority_of(document))


def caller_city(document: dict[str, Any], headers: Mapping[str, str], ip: str | None) -> str | None:
    """The city a gateway finds for a request (lower-case `headers`) through a trusted proxy:
    the city header's, else GeoIP's for `ip`."""
    city_header = headers.get(document["gray"]["city_header"].lower())
    return caller_resolver().city(ip, city_header, trusted=True)


def simulate(
    state: PolicyState,
    *,
    service: str | None,
    headers: Mapping[str, str] | None,
    ip: str | None,
    city: str | None,
    user: str | None,
    path: list[str] | None = None,
) -> dict[str, Any]:
    """A simulated request is taken as one that came through a trusted proxy: its `ip` is
    the client's, its city header is believed. Without an explicit `city`, the city is the
    one a gateway would find: the city header's, else GeoIP's for `ip`.

    With `path` (the services the request reaches in turn), it enters at the first one and
    each hop is answered: the version it gets, and whether that is the fallback."""
    headers = lower_headers(headers or {})
    document = state.document
    if city is None:
        city = caller_city(document, headers, ip)
    matcher = matcher_for(state)
    entry = path[0] if path else service
    decide = matcher.for_service(entry) if entry else matcher.decide
    decision = decide(headers, ip=ip, city=city or "", user=user)
    result: dict[str, Any] = {
        "flag": decision.flag,
        "matched": decision.matched,
        "lane": decision.lane,
        "city": city,
        "revision": state.revision,
        "version": None,
        "instances": [],
    }
    if not entry:
        return result
    services = path or [entry]
    # One read of the instances for the whole path (a query per hop cost the most).
    instances = instances_of(services)
    hops = [hop(document, name, decision, instances[name]) for name in services]
    result["version"], result["instances"] = hops[0]["version"], hops[0].pop("chosen")
    for later in hops[1:]:
        later.pop("chosen")
    if path:
        result["hops"] = hops
    return result


def instances_of(services: Iterable[str]) -> dict[str, list[dict[str, Any]]]:
    """The instances of `services` as hop() takes them, in one query."""
    instances: dict[str, list[dict[str, Any]]] = {name: [] for name in services}
    for row in Instance.objects.filter(service__name__in=list(instances)).values(
        "service__name", "id", "instance_id", "host", "port", "version", "state", "weight"
    ):
        fields: dict[str, Any] = dict(row)
        instances[fields.pop("service__name")].append(fields)
    return instances


def hop(
    document: dict[str, Any], service: str, decision: Decision, instances: list[dict[str, Any]]
) -> dict[str, Any]:
    """What a request under `decision` gets at `service` (docs/gateway-protocol.md, "Per
    hop"), with the instances it may reach (of `instances`, the service's)."""
    prod, gray = effective_versions(document, service)
    members = {
        name: lane["members"][service]["version"]
        for name, lane in lanes_of(document).items()
        if service in lane["members"]
    }
    excluded = frozenset(quarantined_of(document).get(service, []))
    # `routing` off (the reference design's gray.load): the balancer ignores versions.
    routing = document["gray"]["routing"]
    ask = ask_for(decision.flag, decision.lane, prod, gray, members) if routing else None
    version, chosen, fallback = select_asked(instances, ask, excluded=excluded)
    return {
        "service": service,
        "asked": ask.version if ask else None,
        "version": version,
        "fallback": fallback,
        "routable": len(chosen),
        "in_lane": decision.lane is not None
        and (decision.lane == GRAY_LANE or decision.lane in members),
        "chosen": chosen,
    }
