"""What the gateway would do for a request, computed with the gateway's own engine."""

from registry_sync.models import Instance
from releases.documents import effective_versions
from releases.models import PolicyState
from routing_engine import GrayMatcher, lower_headers, select_instances

_matchers: dict[int, GrayMatcher] = {}


def matcher_for(state: PolicyState) -> GrayMatcher:
    """Compiling 100k users and 10k CIDRs takes a while, so keep one matcher per revision."""
    matcher = _matchers.get(state.revision)
    if matcher is None:
        matcher = GrayMatcher(state.document["gray"])
        _matchers.clear()
        _matchers[state.revision] = matcher
    return matcher


def simulate(state: PolicyState, *, service, headers, ip, city, user) -> dict:
    decision = matcher_for(state).decide(lower_headers(headers or {}), ip=ip, city=city, user=user)
    document = state.document
    result = {
        "flag": decision.flag,
        "matched": decision.matched,
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
        chosen = [i for i in instances if i["state"] == "UP"]
        result["version"] = None
    else:
        result["version"], chosen = select_instances(instances, decision.flag, prod, gray)
    result["instances"] = chosen
    return result
